target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @tiny_elementwise(float addrspace(1)* %x, i16 addrspace(1)* %y, i16 addrspace(1)* %out, i32 %n) {
entry:
	%0 = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
	%1 = and i32 %0, 31
	%2 = lshr i32 %0, 5
	%3 = and i32 %1, 31
	br label %body1

body1:
	%4 = add i32 %3, 0
	%5 = icmp slt i32 %4, %n
	%6 = getelementptr float, float addrspace(1)* %x, i32 %4
	%7 = zext i1 %5 to i32
	%8 = bitcast float 0.0 to i32
	%9 = call i32 asm "{\0A\09.reg .pred p;\0A\09setp.ne.b32 p, $2, 0;\0A\09mov.b32 $0, $3;\0A\09@p ld.global.b32 $0, [$1];\0A\09}", "=r,l,r,r"(float addrspace(1)* %6, i32 %7, i32 %8) nounwind
	%10 = bitcast i32 %9 to float
	%11 = getelementptr i16, i16 addrspace(1)* %y, i32 %4
	%12 = load i16, i16 addrspace(1)* %11
	%13 = zext i16 %12 to i32
	%14 = shl i32 %13, 16
	%15 = bitcast i32 %14 to float
	%16 = fadd float %10, %15
	%17 = call float @llvm.nvvm.ex2.approx.ftz.f(float %16)
	%18 = call i16 asm "cvt.rn.bf16.f32 $0, $1;", "=h,f"(float %17) nounwind
	%19 = getelementptr i16, i16 addrspace(1)* %out, i32 %4
	%20 = zext i1 %5 to i32
	call void asm sideeffect "{\0A\09.reg .pred p;\0A\09setp.ne.b32 p, $2, 0;\0A\09@p st.global.b16 [$0], $1;\0A\09}", "l,h,r,~{memory}"(i16 addrspace(1)* %19, i16 %18, i32 %20)
	ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

declare float @llvm.nvvm.ex2.approx.ftz.f(float %0)

!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, i16 addrspace(1)*, i16 addrspace(1)*, i32)* @tiny_elementwise, !"maxntidx", i32 32}
