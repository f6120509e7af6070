package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// selfCPU is this process's CPU time (user and system): the clients'.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTick is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// procCPU is the CPU time (user and system) process pid has used, read
// from /proc; 0 where there is no /proc.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces: the fields start after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64) // field 14 of the whole line
	stime, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return time.Duration(utime+stime) * clockTick
}

// cpu is the CPU time the servers' processes have used together.
func (s *servers) cpu() time.Duration {
	var t time.Duration
	for _, p := range s.procs {
		t += procCPU(p.Process.Pid)
	}
	return t
}

// procChildrenCPU is the CPU time (user and system) of pid's children that
// have ended and been waited for (cutime and cstime in /proc/PID/stat).
func procChildrenCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0
	}
	cu, _ := strconv.ParseInt(f[13], 10, 64) // field 16
	cs, _ := strconv.ParseInt(f[14], 10, 64) // field 17
	return time.Duration(cu+cs) * clockTick
}
