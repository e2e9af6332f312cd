package codegen

import (
	"os"
	"testing"

	"github.com/fac-compiler/fac/codegen/sm90"
)

// TestMain makes "sm_90a" in this package's tests mean the mma.sync path
// (wgmma off), so each case names its path; the wgmma cases turn it on with
// t.Setenv(sm90.EnvWGMMA, "1").
func TestMain(m *testing.M) {
	os.Setenv(sm90.EnvWGMMA, "0")
	os.Exit(m.Run())
}
