package parser

import (
	"fmt"
	"reflect"
	"strings"
)

// Dump prints an AST node as an indented tree, leaving out positions and
// empty fields, for golden tests and debugging.
func Dump(node any) string {
	var b strings.Builder
	dump(&b, reflect.ValueOf(node), 0)
	return b.String()
}

func dump(b *strings.Builder, v reflect.Value, depth int) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			b.WriteString("nil\n")
			return
		}
		v = v.Elem()
	}
	ind := strings.Repeat("  ", depth)
	switch v.Kind() {
	case reflect.Struct:
		b.WriteString(v.Type().Name() + "\n")
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			fv := v.Field(i)
			if f.Name == "Pos" || f.Name == "End" || !f.IsExported() || fv.IsZero() {
				continue
			}
			b.WriteString(ind + "  " + f.Name + ": ")
			dump(b, fv, depth+1)
		}
	case reflect.Slice:
		b.WriteString("\n")
		for i := 0; i < v.Len(); i++ {
			b.WriteString(ind + "  - ")
			dump(b, v.Index(i), depth+2)
		}
	case reflect.String:
		b.WriteString(fmt.Sprintf("%q\n", v.String()))
	default:
		b.WriteString(fmt.Sprintf("%v\n", v.Interface()))
	}
}
