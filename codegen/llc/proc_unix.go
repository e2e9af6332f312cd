//go:build unix

package llc

import (
	"os"
	"os/exec"
	"syscall"
)

// killGroup makes cmd the leader of a new process group and, on
// cancellation, kills the whole group: a wrapper script's children (or a
// stuck llc's) must not outlive the deadline holding the output pipes.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			if err == syscall.ESRCH {
				return os.ErrProcessDone
			}
			return cmd.Process.Kill()
		}
		return nil
	}
}
