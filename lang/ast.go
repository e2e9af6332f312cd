// Package lang is the front end of the tile language after parsing: the AST
// (these structs double as the participle grammar), the checker, and the
// lowering of an instantiated kernel or mod to tile IR.
//
// Grammar (EBNF; the struct tags below are the source of truth):
//
//	File      = Decl* .
//	Decl      = (ConstDecl | ModDecl | FnDecl | KernelDecl) [";"] .
//	ConstDecl = "const" Ident [":" TypeRef] "=" Expr .
//	ModDecl   = ("mask" | "score") Ident [CParams] "(" [Param {"," Param}] ")" ["->" TypeRef] Block .
//	FnDecl    = "fn" Ident "(" [Param {"," Param}] ")" ["->" (TypeRef | "(" TypeRef {"," TypeRef} ")")] Block .
//	KernelDecl= "kernel" Ident [CParams] "(" [Param {"," Param}] ")" Block .
//	CParams   = "<" CParam {"," CParam} ">" .
//	CParam    = Ident ":" Ident ["=" Add] .           // kinds: i32 f32 bool type mask score; no comparison, as > closes the list
//	Param     = Ident [":" TypeRef] .
//	TypeRef   = Ident ["[" TypeRef "]"] ["[" Add {"," Add} "]"] . // f32, ptr[f32], tensor[i32], tensor[i32][batch, seqlen_q]
//	Block     = "{" Stmt* "}" .
//	Stmt      = (Let | Var | For | If | Return | Assign | ExprStmt) [";"] .
//	Let       = "let" Ident {"," Ident} "=" Expr .  // several names: the results of a fn call
//	Var       = "var" Ident {"," Ident} "=" Expr .
//	Assign    = Ident {"," Ident} "=" Expr .
//	For       = "for" Ident "in" "range" "(" Arg {"," Arg} ")" Block .
//	If        = "if" Expr Block ["else" (If | Block)] .
//	Return    = "return" [Expr {"," Expr}] .
//	Expr      = And {"||" And} .
//	And       = Cmp {"&&" Cmp} .
//	Cmp       = Add [("==" | "!=" | "<=" | ">=" | "<" | ">") Add] .
//	Add       = Mul {("+" | "-") Mul} .
//	Mul       = Unary {("*" | "/" | "%") Unary} .
//	Unary     = ("-" | "!") Unary | Postfix .
//	Postfix   = Primary {Call | Index} .
//	Call      = "(" [Arg {"," Arg}] ")" .
//	Arg       = [Ident "="] Expr .
//	Index     = "[" IndexItem {"," IndexItem} "]" .
//	IndexItem = ":" | "None" | Expr .
//	Primary   = Float | Int | "true" | "false" | Ident | "(" Expr ")" | "[" [Expr {"," Expr}] "]" .
//
// Keywords are reserved (the lexer never makes them an Ident): const kernel
// let var for in range if else return true false None. mask, score and fn
// are not: mask and score also name a kernel's mod parameters. Comments run from // to the
// end of the line, but a // right after an operand on the same line is an
// error, not a comment: it is Python's floor division (parser.screen). So
// are & | ~ ^, which fac does not have. docs/language.md is the user's guide.
package lang

import "github.com/alecthomas/participle/v2/lexer"

// File is one source file.
type File struct {
	Pos   lexer.Position
	Decls []*Decl `parser:"@@*"`
}

// Decl is a top-level declaration. It may end with ";", as a statement
// may: a comment after an operand must follow one (see Comments in
// docs/language.md), as in `const N = 64; // rows`.
type Decl struct {
	Pos    lexer.Position
	Const  *ConstDecl  `parser:"(  @@"`
	Mod    *ModDecl    `parser:" | @@"`
	Fn     *FnDecl     `parser:" | @@"`
	Kernel *KernelDecl `parser:" | @@ )"`
	Semi   bool        `parser:"@\";\"?"`
}

// ConstDecl is a named constant: `const LOG2E: f32 = 1.4426950408889634`.
type ConstDecl struct {
	Pos   lexer.Position
	Name  string   `parser:"\"const\" @Ident"`
	Type  *TypeRef `parser:"(\":\" @@)?"`
	Value *Expr    `parser:"\"=\" @@"`
}

// ModDecl is a mask_mod or score_mod: `mask causal(b, h, q_idx, kv_idx) { ... }`.
type ModDecl struct {
	Pos     lexer.Position
	Kind    string    `parser:"@(\"mask\" | \"score\")"`
	Name    string    `parser:"@Ident"`
	CParams []*CParam `parser:"(\"<\" @@ (\",\" @@)* \">\")?"`
	Params  []*Param  `parser:"\"(\" (@@ (\",\" @@)*)? \")\""`
	Result  *TypeRef  `parser:"(\"->\" @@)?"`
	Body    *Block    `parser:"@@"`
}

// FnDecl is a tile function: `fn row_lse(m: f32, l: f32) -> f32 { ... }`.
// Calls of it are expanded in place when they are lowered; its parameters
// are bound to the arguments as by let (a constant stays a constant), so
// it may take tiles, scalars, constants, types and mods. A parameter's
// type, if written, is checked: an element type (any shape), ptr[T],
// type, mask or score. Results, if declared, are checked the same way.
type FnDecl struct {
	Pos     lexer.Position
	Name    string     `parser:"\"fn\" @Ident"`
	Params  []*Param   `parser:"\"(\" (@@ (\",\" @@)*)? \")\""`
	Results []*TypeRef `parser:"(\"->\" ( \"(\" @@ (\",\" @@)* \")\" | @@ ))?"`
	Body    *Block     `parser:"@@"`
}

// KernelDecl is a kernel: `kernel flash_fwd<BLOCK_M: i32 = 64>(q: ptr[f32], ...) { ... }`.
type KernelDecl struct {
	Pos     lexer.Position
	Name    string    `parser:"\"kernel\" @Ident"`
	CParams []*CParam `parser:"(\"<\" @@ (\",\" @@)* \">\")?"`
	Params  []*Param  `parser:"\"(\" (@@ (\",\" @@)*)? \")\""`
	Body    *Block    `parser:"@@"`
}

// CParam is a compile-time parameter: `BLOCK_M: i32 = 64`, `mask: mask = none`.
type CParam struct {
	Pos     lexer.Position
	Name    string   `parser:"@Ident \":\""`
	Kind    string   `parser:"@Ident"`
	Default *AddExpr `parser:"(\"=\" @@)?"`
}

// Param is a run-time parameter; mods may leave the standard ones untyped.
type Param struct {
	Pos  lexer.Position
	Name string   `parser:"@Ident"`
	Type *TypeRef `parser:"(\":\" @@)?"`
}

// TypeRef names a type: `f32`, `ptr[bf16]`, `tensor[i32]`, `ptr[DTYPE]`;
// an aux tensor may declare its shape: `tensor[i32][batch, seqlen_q]`.
type TypeRef struct {
	Pos   lexer.Position
	Name  string     `parser:"@Ident"`
	Elem  *TypeRef   `parser:"(\"[\" @@ \"]\")?"`
	Shape []*AddExpr `parser:"(\"[\" @@ (\",\" @@)* \"]\")?"`
}

// Block is a braced statement list.
type Block struct {
	Pos   lexer.Position
	Stmts []*Stmt `parser:"\"{\" @@* \"}\""`
	// EndPos is set by participle to the position just after the closing "}".
	EndPos lexer.Position
}

// Stmt is one statement.
type Stmt struct {
	Pos    lexer.Position
	Let    *LetStmt    `parser:"(  @@"`
	Var    *VarStmt    `parser:"| @@"`
	For    *ForStmt    `parser:"| @@"`
	If     *IfStmt     `parser:"| @@"`
	Return *ReturnStmt `parser:"| @@"`
	Assign *AssignStmt `parser:"| @@"`
	Expr   *Expr       `parser:"| @@ )"`
	Semi   bool        `parser:"@\";\"?"`
}

// LetStmt binds an immutable name: `let x = e`. More names bind the
// results of a function call: `let empty, out = softmax_normalize(acc, l, 1.0)`.
type LetStmt struct {
	Pos   lexer.Position
	Name  string   `parser:"\"let\" @Ident"`
	More  []string `parser:"(\",\" @Ident)*"`
	Value *Expr    `parser:"\"=\" @@"`
}

// VarStmt binds a mutable name: `var acc = zeros([M, D], f32)`; as for
// let, more names bind a function call's results.
type VarStmt struct {
	Pos   lexer.Position
	Name  string   `parser:"\"var\" @Ident"`
	More  []string `parser:"(\",\" @Ident)*"`
	Value *Expr    `parser:"\"=\" @@"`
}

// AssignStmt reassigns a var: `acc = acc * alpha[:, None]`, or several
// from a function call's results: `m_i, l_i, acc = softmax_update(...)`.
type AssignStmt struct {
	Pos   lexer.Position
	Name  string   `parser:"@Ident"`
	More  []string `parser:"(\",\" @Ident)* \"=\""`
	Value *Expr    `parser:"@@"`
}

// ForStmt is a counted loop: `for start in range(0, seqlen_k, BLOCK_N) { ... }`.
// Vars assigned in the body are carried from one iteration to the next.
type ForStmt struct {
	Pos  lexer.Position
	Var  string `parser:"\"for\" @Ident \"in\" \"range\""`
	Args []*Arg `parser:"\"(\" @@ (\",\" @@)* \")\""`
	Body *Block `parser:"@@"`
}

// IfStmt is a conditional; on a compile-time condition only the taken arm is compiled.
type IfStmt struct {
	Pos    lexer.Position
	Cond   *Expr   `parser:"\"if\" @@"`
	Then   *Block  `parser:"@@"`
	ElseIf *IfStmt `parser:"(\"else\" (@@"`
	Else   *Block  `parser:"| @@))?"`
}

// ReturnStmt returns from a mod or a function; a function may return
// several values: `return m_new, l_new, acc_new`.
type ReturnStmt struct {
	Pos   lexer.Position
	Value *Expr   `parser:"\"return\" ( @@"`
	More  []*Expr `parser:"  (\",\" @@)* )?"`
}

// Expr is a logical-or chain (lowest precedence).
type Expr struct {
	Pos   lexer.Position
	Left  *AndExpr   `parser:"@@"`
	Right []*AndExpr `parser:"(\"||\" @@)*"`
	// Source is the whole text of an expression parsed alone
	// (parser.ParseExpr: a --mask value), so that errors positioned in it
	// show its line and a caret; "" in a file, whose text the Program has.
	Source string
}

// AndExpr is a logical-and chain.
type AndExpr struct {
	Pos   lexer.Position
	Left  *CmpExpr   `parser:"@@"`
	Right []*CmpExpr `parser:"(\"&&\" @@)*"`
}

// CmpExpr is an optional comparison (comparisons do not chain).
type CmpExpr struct {
	Pos   lexer.Position
	Left  *AddExpr `parser:"@@"`
	Op    string   `parser:"( @(\"==\" | \"!=\" | \"<=\" | \">=\" | \"<\" | \">\")"`
	Right *AddExpr `parser:"  @@ )?"`
}

// AddExpr is a chain of + and -.
type AddExpr struct {
	Pos  lexer.Position
	Left *MulExpr `parser:"@@"`
	Rest []*AddOp `parser:"@@*"`
}

// AddOp is one `+ x` or `- x`.
type AddOp struct {
	Pos   lexer.Position
	Op    string   `parser:"@(\"+\" | \"-\")"`
	Right *MulExpr `parser:"@@"`
}

// MulExpr is a chain of *, / and %.
type MulExpr struct {
	Pos  lexer.Position
	Left *Unary   `parser:"@@"`
	Rest []*MulOp `parser:"@@*"`
}

// MulOp is one `* x`, `/ x` or `% x`.
type MulOp struct {
	Pos   lexer.Position
	Op    string `parser:"@(\"*\" | \"/\" | \"%\")"`
	Right *Unary `parser:"@@"`
}

// Unary is a prefix operator or a postfix expression.
type Unary struct {
	Pos     lexer.Position
	Op      string   `parser:"(  @(\"-\" | \"!\")"`
	Operand *Unary   `parser:"   @@ )"`
	Postfix *Postfix `parser:"| @@"`
}

// Postfix is a primary followed by calls and indexing.
type Postfix struct {
	Pos     lexer.Position
	Primary *Primary  `parser:"@@"`
	Suffix  []*Suffix `parser:"@@*"`
}

// Suffix is a call `(args)` or an index `[items]`.
type Suffix struct {
	Pos   lexer.Position
	Call  *CallArgs  `parser:"  @@"`
	Index *IndexArgs `parser:"| @@"`
}

// CallArgs is a call's argument list.
type CallArgs struct {
	Pos  lexer.Position
	Args []*Arg `parser:"\"(\" (@@ (\",\" @@)*)? \")\""`
}

// Arg is a positional or named (`axis=1`) argument.
type Arg struct {
	Pos   lexer.Position
	Name  string `parser:"(@Ident \"=\" (?! \"=\"))?"`
	Value *Expr  `parser:"@@"`
}

// IndexArgs is `[i, j]`: `:` keeps an axis, `None` inserts one, an
// expression gathers from an aux tensor.
type IndexArgs struct {
	Pos   lexer.Position
	Items []*IndexItem `parser:"\"[\" @@ (\",\" @@)* \"]\""`
}

// IndexItem is one index position.
type IndexItem struct {
	Pos   lexer.Position
	Slice bool  `parser:"  @\":\""`
	None  bool  `parser:"| @\"None\""`
	Expr  *Expr `parser:"| @@"`
}

// Primary is a literal, a name, a parenthesized expression or a list.
type Primary struct {
	Pos   lexer.Position
	Float *string `parser:"  @Float"`
	Int   *string `parser:"| @Int"`
	True  bool    `parser:"| @\"true\""`
	False bool    `parser:"| @\"false\""`
	Ident *string `parser:"| @Ident"`
	Paren *Expr   `parser:"| \"(\" @@ \")\""`
	List  *List   `parser:"| @@"`
}

// List is a bracketed list, used for shapes: `[BLOCK_M, HEAD_DIM]`.
type List struct {
	Pos   lexer.Position
	Items []*Expr `parser:"\"[\" (@@ (\",\" @@)*)? \"]\""`
}

// Close is the position of the block's closing "}".
func (b *Block) Close() lexer.Position {
	p := b.EndPos
	if p.Line == 0 {
		return b.Pos
	}
	if p.Column > 1 {
		p.Column--
		p.Offset--
	}
	return p
}

// bare returns the postfix expression e consists of, or nil when e has an
// operator at any level: `f(x)[i]` is bare, `a + b` and `-a` are not.
func (e *Expr) bare() *Postfix {
	if e == nil || e.Left == nil || len(e.Right) > 0 || len(e.Left.Right) > 0 {
		return nil
	}
	c := e.Left.Left
	if c == nil || (c.Op != "" && c.Right != nil) || c.Left == nil || len(c.Left.Rest) > 0 {
		return nil
	}
	m := c.Left.Left
	if m == nil || len(m.Rest) > 0 || m.Left == nil || m.Left.Postfix == nil {
		return nil
	}
	return m.Left.Postfix
}
