target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @tiny_reduce(float addrspace(1)* %x, float addrspace(1)* %out) {
entry:
	%0 = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
	%1 = and i32 %0, 31
	%2 = lshr i32 %0, 5
	%3 = lshr i32 %1, 3
	%4 = and i32 %3, 3
	%5 = and i32 %1, 7
	br label %body1

body1:
	%6 = mul i32 %4, 8
	%7 = add i32 %6, %5
	%8 = sext i32 %7 to i64
	%9 = mul i64 %8, 4
	%10 = ptrtoint float addrspace(1)* %x to i64
	%11 = add i64 %10, %9
	%12 = inttoptr i64 %11 to float addrspace(1)*
	%13 = load float, float addrspace(1)* %12
	%14 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %13, i32 1, i32 31)
	%15 = call float @llvm.maximum.f32(float %13, float %14)
	%16 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %15, i32 2, i32 31)
	%17 = call float @llvm.maximum.f32(float %15, float %16)
	%18 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %17, i32 4, i32 31)
	%19 = call float @llvm.maximum.f32(float %17, float %18)
	%20 = sext i32 %4 to i64
	%21 = mul i64 %20, 4
	%22 = ptrtoint float addrspace(1)* %out to i64
	%23 = add i64 %22, %21
	%24 = inttoptr i64 %23 to float addrspace(1)*
	%25 = and i32 %1, 7
	%26 = icmp eq i32 %25, 0
	br i1 %26, label %store2, label %store.end3

store2:
	store float %19, float addrspace(1)* %24
	br label %store.end3

store.end3:
	ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

declare float @llvm.nvvm.shfl.sync.bfly.f32(i32 %0, float %1, i32 %2, i32 %3)

declare float @llvm.maximum.f32(float %0, float %1)

!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, float addrspace(1)*)* @tiny_reduce, !"maxntidx", i32 32}
