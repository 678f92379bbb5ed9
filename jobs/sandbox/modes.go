package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// A run may leave files and directories in its workspace or its cache
// that their owner — the sandbox's uid, which is the worker's own under a
// non-root worker — cannot read or enter (chmod 000). Before a tree is
// measured or removed, ownerAccess gives the owner back read and write
// on every file and read, write and search on every directory, never
// following a symbolic link: every step opens the next name below an
// already open directory with O_NOFOLLOW, and a mode is changed through
// an O_PATH descriptor of the very file that was checked, so a name
// swapped for a link between the check and the change cannot redirect
// it.

// maxModeDepth bounds how deep ownerAccess goes (an open descriptor per
// level); below it a tree is left as it is (the caller treats what it
// cannot read as unmeasured).
const maxModeDepth = 256

// ownerAccess makes root and everything below it accessible to its owner.
// It returns the first error met; it goes on past errors.
func ownerAccess(root string) error {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", root, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return fmt.Errorf("sandbox: %s: %w", root, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		return nil
	}
	err = chmodPath(fd, st.Mode|0o700)
	unix.Close(fd)
	dir, oerr := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if oerr != nil {
		return errors.Join(err, fmt.Errorf("sandbox: %s: %w", root, oerr))
	}
	return errors.Join(err, ownerAccessIn(dir, 1))
}

// ownerAccessIn fixes the entries of the open directory dir (and closes
// it).
func ownerAccessIn(dir, depth int) error {
	f := os.NewFile(uintptr(dir), "dir")
	defer f.Close()
	var first error
	for {
		names, err := f.Readdirnames(256)
		for _, name := range names {
			if err := ownerAccessAt(dir, name, depth); err != nil && first == nil {
				first = err
			}
		}
		if err == io.EOF || len(names) == 0 {
			return first
		}
		if err != nil {
			return errors.Join(first, err)
		}
	}
}

func ownerAccessAt(dir int, name string, depth int) error {
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return err
	}
	var want uint32
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		want = 0o700
	case unix.S_IFREG:
		want = 0o600
	default: // a link, a socket, a fifo: nothing to read through it
		unix.Close(fd)
		return nil
	}
	if st.Mode&want != want {
		err = chmodPath(fd, st.Mode|want)
	}
	unix.Close(fd)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || depth >= maxModeDepth {
		return err
	}
	sub, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return ownerAccessIn(sub, depth+1)
}

// chmodPath changes the mode of the file an O_PATH descriptor holds (what
// the C library's lchmod does): fchmod refuses such a descriptor, the
// descriptor's /proc name does not.
func chmodPath(fd int, mode uint32) error {
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode&0o7777)
}
