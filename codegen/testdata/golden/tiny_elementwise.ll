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
	%5 = sext i32 %3 to i64
	%6 = mul i64 %5, 4
	%7 = ptrtoint float addrspace(1)* %x to i64
	%8 = add i64 %7, %6
	%9 = inttoptr i64 %8 to float addrspace(1)*
	%10 = zext i1 %4 to i32
	%11 = bitcast float 0.0 to i32
	%12 = call i32 asm "{\0A\09.reg .pred p;\0A\09setp.ne.b32 p, $2, 0;\0A\09mov.b32 $0, $3;\0A\09@p ld.global.b32 $0, [$1];\0A\09}", "=r,l,r,r"(float addrspace(1)* %9, i32 %10, i32 %11) nounwind
	%13 = bitcast i32 %12 to float
	%14 = sext i32 %3 to i64
	%15 = mul i64 %14, 2
	%16 = ptrtoint i16 addrspace(1)* %y to i64
	%17 = add i64 %16, %15
	%18 = inttoptr i64 %17 to i16 addrspace(1)*
	%19 = load i16, i16 addrspace(1)* %18
	%20 = zext i16 %19 to i32
	%21 = shl i32 %20, 16
	%22 = bitcast i32 %21 to float
	%23 = fadd float %13, %22
	%24 = call float @llvm.nvvm.ex2.approx.ftz.f(float %23)
	%25 = call i16 asm "cvt.rn.bf16.f32 $0, $1;", "=h,f"(float %24) nounwind readnone
	%26 = sext i32 %3 to i64
	%27 = mul i64 %26, 2
	%28 = ptrtoint i16 addrspace(1)* %out to i64
	%29 = add i64 %28, %27
	%30 = inttoptr i64 %29 to i16 addrspace(1)*
	%31 = zext i1 %4 to i32
	call void asm sideeffect "{\0A\09.reg .pred p;\0A\09setp.ne.b32 p, $2, 0;\0A\09@p st.global.b16 [$0], $1;\0A\09}", "l,h,r,~{memory}"(i16 addrspace(1)* %30, i16 %25, i32 %31)
	ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

declare float @llvm.nvvm.ex2.approx.ftz.f(float %0)

!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, i16 addrspace(1)*, i16 addrspace(1)*, i32)* @tiny_elementwise, !"maxntidx", i32 32}
