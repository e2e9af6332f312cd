target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @tiny_elementwise(float addrspace(1)* %x, i16 addrspace(1)* %y, i16 addrspace(1)* %out, i32 %n) {
entry:
	%0 = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
	%1 = and i32 %0, 31
	%2 = lshr i32 %0, 5
	%3 = and i32 %1, 31
	br label %body1

body1:
	%4 = icmp slt i32 %3, %n
	%5 = getelementptr float, float addrspace(1)* %x, i32 %3
	%6 = zext i1 %4 to i32
	%7 = bitcast float 0.0 to i32
	%8 = call i32 asm "{\0A\09.reg .pred p;\0A\09setp.ne.b32 p, $2, 0;\0A\09mov.b32 $0, $3;\0A\09@p ld.global.b32 $0, [$1];\0A\09}", "=r,l,r,r"(float addrspace(1)* %5, i32 %6, i32 %7) nounwind
	%9 = bitcast i32 %8 to float
	%10 = getelementptr i16, i16 addrspace(1)* %y, i32 %3
	%11 = load i16, i16 addrspace(1)* %10
	%12 = zext i16 %11 to i32
	%13 = shl i32 %12, 16
	%14 = bitcast i32 %13 to float
	%15 = fadd float %9, %14
	%16 = call float @llvm.nvvm.ex2.approx.ftz.f(float %15)
	%17 = call i16 asm "cvt.rn.bf16.f32 $0, $1;", "=h,f"(float %16) nounwind
	%18 = getelementptr i16, i16 addrspace(1)* %out, i32 %3
	%19 = zext i1 %4 to i32
	call void asm sideeffect "{\0A\09.reg .pred p;\0A\09setp.ne.b32 p, $2, 0;\0A\09@p st.global.b16 [$0], $1;\0A\09}", "l,h,r,~{memory}"(i16 addrspace(1)* %18, i16 %17, i32 %19)
	ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

declare float @llvm.nvvm.ex2.approx.ftz.f(float %0)

!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, i16 addrspace(1)*, i16 addrspace(1)*, i32)* @tiny_elementwise, !"maxntidx", i32 32}
