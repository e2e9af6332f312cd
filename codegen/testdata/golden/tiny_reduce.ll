target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @tiny_reduce(float addrspace(1)* %x, float addrspace(1)* %out) {
entry:
	%0 = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
	%1 = and i32 %0, 31
	%2 = lshr i32 %1, 3
	%3 = and i32 %2, 3
	%4 = and i32 %1, 7
	br label %body1

body1:
	%5 = mul i32 %3, 8
	%6 = add i32 %5, %4
	%7 = sext i32 %6 to i64
	%8 = mul i64 %7, 4
	%9 = ptrtoint float addrspace(1)* %x to i64
	%10 = add i64 %9, %8
	%11 = inttoptr i64 %10 to float addrspace(1)*
	%12 = load float, float addrspace(1)* %11
	%13 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %12, i32 1, i32 31)
	%14 = call float @llvm.maximum.f32(float %12, float %13)
	%15 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %14, i32 2, i32 31)
	%16 = call float @llvm.maximum.f32(float %14, float %15)
	%17 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %16, i32 4, i32 31)
	%18 = call float @llvm.maximum.f32(float %16, float %17)
	%19 = sext i32 %3 to i64
	%20 = mul i64 %19, 4
	%21 = ptrtoint float addrspace(1)* %out to i64
	%22 = add i64 %21, %20
	%23 = inttoptr i64 %22 to float addrspace(1)*
	%24 = and i32 %1, 7
	%25 = icmp eq i32 %24, 0
	br i1 %25, label %store2, label %store.end3

store2:
	store float %18, float addrspace(1)* %23
	br label %store.end3

store.end3:
	ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

declare float @llvm.nvvm.shfl.sync.bfly.f32(i32 %0, float %1, i32 %2, i32 %3)

declare float @llvm.maximum.f32(float %0, float %1)

!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, float addrspace(1)*)* @tiny_reduce, !"maxntidx", i32 32}
