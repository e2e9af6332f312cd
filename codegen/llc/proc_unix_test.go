//go:build unix

package llc

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sleeper is a fake llc body that starts a long sleep as a child (so the
// child, not just the shell, holds the output pipe), records its pid and
// waits for it.
func sleeper(t *testing.T) (body, pidFile string) {
	t.Helper()
	if _, err := os.Stat("/bin/sleep"); err != nil {
		t.Skip("no /bin/sleep")
	}
	pidFile = filepath.Join(t.TempDir(), "pid")
	return "/bin/sleep 1000 &\necho $! > " + pidFile + "\nwait", pidFile
}

// gone reports whether pid has exited (a zombie counts: nothing reaps
// orphans in some containers).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

func waitGone(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("fake llc did not record its child: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for deadline := time.Now().Add(5 * time.Second); !gone(pid); {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("llc's child %d outlived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCompileTimeout(t *testing.T) {
	body, pidFile := sleeper(t)
	tool := fakeCompiler(t, body)
	tool.Timeout = 300 * time.Millisecond
	start := time.Now()
	_, err := tool.Compile(context.Background(), []byte(addOne), "sm_90a")
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "llc sm_90a ("+tool.Path+") did not finish within 300ms and was killed") {
		t.Errorf("hanging llc: err = %v", err)
	}
	if took > 3*time.Second {
		t.Errorf("hanging llc took %v to fail, want about the 300ms timeout", took)
	}
	waitGone(t, pidFile)

	// The message says how to allow longer.
	tool.Timeout = 200 * time.Millisecond
	if _, err := tool.Compile(context.Background(), []byte(addOne), "sm_90a"); err == nil || !strings.Contains(err.Error(), "within 200ms") || !strings.Contains(err.Error(), EnvTimeout) {
		t.Errorf("hanging llc with a 200ms timeout: err = %v", err)
	}
	waitGone(t, pidFile)
}

func TestCompileHonoursContext(t *testing.T) {
	body, pidFile := sleeper(t)
	tool := fakeCompiler(t, body)
	tool.Timeout = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := tool.Compile(ctx, []byte(addOne), "sm_90a")
	if err == nil || !strings.Contains(err.Error(), "context deadline exceeded") || time.Since(start) > 3*time.Second {
		t.Errorf("cancelled context: err = %v after %v", err, time.Since(start))
	}
	waitGone(t, pidFile)
}

func TestProbeTimeout(t *testing.T) {
	if _, err := os.Stat("/bin/sleep"); err != nil {
		t.Skip("no /bin/sleep")
	}
	path := filepath.Join(t.TempDir(), "llc")
	os.WriteFile(path, []byte("#!/bin/sh\nexec /bin/sleep 1000\n"), 0o755)
	old := probeTimeout
	probeTimeout = 200 * time.Millisecond
	t.Cleanup(func() { probeTimeout = old })
	start := time.Now()
	_, err := Config{Path: path}.Find()
	if err == nil || !strings.Contains(err.Error(), "--version did not finish within 200ms") || time.Since(start) > 3*time.Second {
		t.Errorf("hanging --version: err = %v after %v", err, time.Since(start))
	}
}
