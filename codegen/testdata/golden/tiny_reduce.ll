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
	%8 = getelementptr float, float addrspace(1)* %x, i32 %7
	%9 = load float, float addrspace(1)* %8
	%10 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %9, i32 1, i32 31)
	%11 = call float @llvm.maximum.f32(float %9, float %10)
	%12 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %11, i32 2, i32 31)
	%13 = call float @llvm.maximum.f32(float %11, float %12)
	%14 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %13, i32 4, i32 31)
	%15 = call float @llvm.maximum.f32(float %13, float %14)
	%16 = getelementptr float, float addrspace(1)* %out, i32 %4
	%17 = and i32 %1, 7
	%18 = icmp eq i32 %17, 0
	br i1 %18, label %store2, label %store.end3

store2:
	store float %15, float addrspace(1)* %16
	br label %store.end3

store.end3:
	ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

declare float @llvm.nvvm.shfl.sync.bfly.f32(i32 %0, float %1, i32 %2, i32 %3)

declare float @llvm.maximum.f32(float %0, float %1)

!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, float addrspace(1)*)* @tiny_reduce, !"maxntidx", i32 32}
