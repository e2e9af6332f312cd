package npy

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, shape := range [][]int{{3}, {2, 3}, {2, 1, 3, 2}} {
		n := 1
		for _, d := range shape {
			n *= d
		}
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = float32(i)*0.5 - 1
		}
		b, err := EncodeF32(shape, vals)
		if err != nil {
			t.Fatal(err)
		}
		if (len(b)-len(vals)*4)%64 != 0 {
			t.Errorf("header not 64-byte aligned: %d", len(b)-len(vals)*4)
		}
		p := filepath.Join(dir, "x.npy")
		if err := WriteFile(p, b); err != nil {
			t.Fatal(err)
		}
		a, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a.Shape, shape) || !reflect.DeepEqual(a.F32(), vals) {
			t.Errorf("round trip: got %v %v", a.Shape, a.F32())
		}
	}
	ib, _ := EncodeI32([]int{4}, []int32{1, -2, 3, 4})
	a, err := Decode(ib)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := a.I32(); !reflect.DeepEqual(got, []int32{1, -2, 3, 4}) {
		t.Errorf("i32: %v", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temp files left behind: %v", entries)
	}
}

func TestBadInput(t *testing.T) {
	good, _ := EncodeF32([]int{2, 2}, []float32{1, 2, 3, 4})
	for name, b := range map[string][]byte{
		"empty":     nil,
		"magic":     []byte("hello world, not npy"),
		"truncated": good[:len(good)-3],
		"dtype":     []byte(string(good[:10]) + string(good[10:len(good)-16])),
	} {
		if _, err := Decode(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := EncodeF32([]int{3}, []float32{1}); err == nil {
		t.Error("shape/len mismatch accepted")
	}
}
