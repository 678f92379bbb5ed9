package sandbox

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procStat is the part of /proc/PID/stat this package uses.
type procStat struct {
	pid     int
	state   byte
	ppid    int
	session int
	start   uint64 // start time in clock ticks after boot; identifies a pid's incarnation
}

// readStat parses /proc/pid/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return procStat{}, errors.New("sandbox: malformed /proc stat")
	}
	// Fields from 3 (state) on.
	f := strings.Fields(s[i+2:])
	if len(f) < 20 {
		return procStat{}, errors.New("sandbox: short /proc stat")
	}
	st := procStat{pid: pid, state: f[0][0]}
	st.ppid, _ = strconv.Atoi(f[1])
	st.session, _ = strconv.Atoi(f[3])
	st.start, _ = strconv.ParseUint(f[19], 10, 64)
	return st, nil
}

// running reports whether st describes a process that has not exited yet
// (a zombie has released everything but its pid).
func (st procStat) running() bool { return st.state != 'Z' && st.state != 'X' }

// procRef names one incarnation of a pid.
type procRef struct {
	pid   int
	start uint64
}

// alive reports whether the process r refers to is still running.
func (r procRef) alive() bool {
	if r.pid <= 0 {
		return false
	}
	st, err := readStat(r.pid)
	return err == nil && st.start == r.start && st.running()
}

// signal sends sig to r if it is still the same process.
func (r procRef) signal(sig syscall.Signal) {
	if r.alive() {
		_ = syscall.Kill(r.pid, sig)
	}
}

// pids lists the pids in /proc.
func pids() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// pidNSMembers returns the running processes whose pid namespace is ns (as
// readlink /proc/PID/ns/pid spells it, "pid:[N]").
func pidNSMembers(ns string) []procRef {
	var out []procRef
	for _, pid := range pids() {
		link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
		if err != nil || link != ns {
			continue
		}
		if st, err := readStat(pid); err == nil && st.running() {
			out = append(out, procRef{pid: pid, start: st.start})
		}
	}
	return out
}

// children returns the running children of pid.
func children(pid int) []procRef {
	var out []procRef
	for _, p := range pids() {
		if st, err := readStat(p); err == nil && st.ppid == pid && st.running() {
			out = append(out, procRef{pid: p, start: st.start})
		}
	}
	return out
}

// sessionMembers returns the running processes of session sid.
func sessionMembers(sid int) []procRef {
	var out []procRef
	for _, pid := range pids() {
		if st, err := readStat(pid); err == nil && st.session == sid && st.running() {
			out = append(out, procRef{pid: pid, start: st.start})
		}
	}
	return out
}

// pollUntil calls cond every few milliseconds until it returns true or
// timeout passes; it reports cond's last result.
func pollUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closeOnExecInherited sets FD_CLOEXEC on every descriptor >= 3 of this
// process. Go opens its own files close-on-exec, so the descriptors this
// changes are ones the process inherited without the flag (from a service
// manager, a shell, a test harness); without it every child, and so every
// sandbox, would inherit them too. Descriptors passed on purpose through
// exec.Cmd.ExtraFiles are unaffected (they are dup2'ed in the child).
func closeOnExecInherited() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
