//go:build linux || darwin || freebsd || netbsd || openbsd

package db

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// alive peeks at an idle connection's socket without blocking and without
// consuming anything: EAGAIN means idle and open, a read of 0 bytes means
// the server closed it.
func alive(c net.Conn) connState {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return connUnknown
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return connUnknown
	}
	state := connUnknown
	var buf [1]byte
	// Control, not Read: pgconn may have a reader of its own blocked on
	// this socket (its background reader finishes a read it had begun), and
	// Read would wait for that reader's lock. MSG_DONTWAIT never blocks.
	err = raw.Control(func(fd uintptr) {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK):
			state = connAlive
		case rerr != nil:
			state = connDead // ECONNRESET and the like
		case n == 0:
			state = connDead
		}
	})
	if err != nil {
		return connUnknown
	}
	return state
}
