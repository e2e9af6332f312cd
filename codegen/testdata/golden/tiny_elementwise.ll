target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @tiny_elementwise(float addrspace(1)* %x, i16 addrspace(1)* %y, i16 addrspace(1)* %out, i32 %n) {
entry:
	%0 = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
	%1 = and i32 %0, 31
	%2 = and i32 %1, 31
	br label %body1

body1:
	%3 = icmp slt i32 %2, %n
	%4 = sext i32 %2 to i64
	%5 = mul i64 %4, 4
	%6 = ptrtoint float addrspace(1)* %x to i64
	%7 = add i64 %6, %5
	%8 = inttoptr i64 %7 to float addrspace(1)*
	%9 = zext i1 %3 to i32
	%10 = bitcast float 0.0 to i32
	%11 = call i32 asm "{\0A\09.reg .pred p;\0A\09setp.ne.b32 p, $2, 0;\0A\09mov.b32 $0, $3;\0A\09@p ld.global.b32 $0, [$1];\0A\09}", "=r,l,r,r"(float addrspace(1)* %8, i32 %9, i32 %10) nounwind
	%12 = bitcast i32 %11 to float
	%13 = sext i32 %2 to i64
	%14 = mul i64 %13, 2
	%15 = ptrtoint i16 addrspace(1)* %y to i64
	%16 = add i64 %15, %14
	%17 = inttoptr i64 %16 to i16 addrspace(1)*
	%18 = load i16, i16 addrspace(1)* %17
	%19 = zext i16 %18 to i32
	%20 = shl i32 %19, 16
	%21 = bitcast i32 %20 to float
	%22 = fadd float %12, %21
	%23 = call float @llvm.nvvm.ex2.approx.ftz.f(float %22)
	%24 = call i16 asm "cvt.rn.bf16.f32 $0, $1;", "=h,f"(float %23) nounwind readnone
	%25 = sext i32 %2 to i64
	%26 = mul i64 %25, 2
	%27 = ptrtoint i16 addrspace(1)* %out to i64
	%28 = add i64 %27, %26
	%29 = inttoptr i64 %28 to i16 addrspace(1)*
	%30 = zext i1 %3 to i32
	call void asm sideeffect "{\0A\09.reg .pred p;\0A\09setp.ne.b32 p, $2, 0;\0A\09@p st.global.b16 [$0], $1;\0A\09}", "l,h,r,~{memory}"(i16 addrspace(1)* %29, i16 %24, i32 %30)
	ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

declare float @llvm.nvvm.ex2.approx.ftz.f(float %0)

!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, i16 addrspace(1)*, i16 addrspace(1)*, i32)* @tiny_elementwise, !"maxntidx", i32 32}
