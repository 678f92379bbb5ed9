package sandbox

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// A step in an image (docs/images.md, "A step in an image"): the image's
// unpacked tree (domain/image's store) is the sandbox's root, read-only;
// the host's /usr, /bin, /etc… are not there at all. bwrap cannot create
// mount points on a read-only tree, so the store creates them when it
// unpacks (proc dev tmp workspace run cache var/tmp root, empty etc/hosts
// and etc/resolv.conf).

// Paths inside an image's sandbox.
const (
	// ImageWorkspace is the workspace inside an image (CI_WORKSPACE).
	ImageWorkspace = "/workspace"
	// ImageHome is HOME inside an image: a tmpfs.
	ImageHome = "/root"
	// sandboxLibs holds the bridge's shared libraries when anvil was
	// built with cgo: the image has its own C library, or none.
	sandboxLibs = "/run/anvil/lib"
)

// ErrImageNeedsBwrap is a step with an image on the process executor.
var ErrImageNeedsBwrap = errors.New("sandbox: a step in an image needs the bwrap executor (ANVIL_SANDBOX=process has no root of its own to put an image under)")

// Image is the root a command runs in, set on a [Spec]; nil runs on the
// host's tree as before.
type Image struct {
	// Root is the unpacked tree on the host.
	Root string
	// Env is the image's environment (KEY=VALUE), under anvil's.
	Env []string
	// Volumes are the image's declared volumes: each a sized tmpfs, when
	// the tree has the directory.
	Volumes []string
	// Hosts, when set, is the file bound over /etc/hosts (a pod's names).
	Hosts string
	// NetNS, when set, is a pod's holder pid: the sandbox joins its user
	// and network namespaces instead of making its own (pod.go).
	NetNS int
}

func (im *Image) validate() error {
	if im == nil {
		return nil
	}
	if !filepath.IsAbs(im.Root) {
		return fmt.Errorf("sandbox: image root %q is not absolute", im.Root)
	}
	for _, d := range []string{"proc", "dev", "tmp", "workspace", "run"} {
		if fi, err := os.Stat(filepath.Join(im.Root, d)); err != nil || !fi.IsDir() {
			return fmt.Errorf("sandbox: the image's tree has no /%s to mount on (unpack it with domain/image)", d)
		}
	}
	return nil
}

// imageEnv is the command's environment in an image: anvil's base, the
// image's Env over it (its PATH above all: without it a postgres image's
// postgres is "not found"), then the run's variables over both.
func (s *Spec) imageEnv() []string {
	m := BaseEnv(ImageHome)
	for _, kv := range s.Image.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" && !strings.ContainsRune(kv, 0) {
			m[k] = v
		}
	}
	m["HOME"] = ImageHome
	for k, v := range s.Env {
		m[k] = v
	}
	m["CI_WORKSPACE"] = ImageWorkspace
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	return env
}

var volumeRE = regexp.MustCompile(`^/[A-Za-z0-9._/-]{1,200}$`)

// imageArgs are bwrap's options for a root in an image.
func (s *Spec) imageArgs(tmpBytes int64) []string {
	im := s.Image
	a := []string{"--die-with-parent", "--new-session"}
	if im.NetNS == 0 {
		a = append(a, "--unshare-all", "--unshare-user", "--disable-userns")
	} else {
		// In a pod: the user and network namespaces are the holder's
		// (entered with nsenter), the rest the sandbox's own.
		a = append(a, "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try", "--disable-userns")
	}
	a = append(a, "--ro-bind", im.Root, "/", "--proc", "/proc", "--dev", "/dev")
	size := func() []string {
		if tmpBytes > 0 {
			return []string{"--size", strconv.FormatInt(tmpBytes, 10)}
		}
		return nil
	}
	for _, d := range []string{"/tmp", "/run", "/var/tmp", ImageHome} {
		if fi, err := os.Stat(filepath.Join(im.Root, d)); err == nil && fi.IsDir() {
			a = append(a, size()...)
			a = append(a, "--tmpfs", d)
		}
	}
	for _, v := range im.Volumes {
		v = filepath.Clean(v)
		if !volumeRE.MatchString(v) || strings.Contains(v, "..") {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(im.Root, v)); err == nil && fi.IsDir() {
			a = append(a, size()...)
			a = append(a, "--tmpfs", v)
		}
	}
	a = append(a, "--bind", s.Workspace, ImageWorkspace)
	if im.Hosts != "" {
		a = append(a, "--ro-bind", im.Hosts, "/etc/hosts")
	}
	return a
}

// bridgeLoader returns how to start the bridge inside an image: argv's
// head, and the binds it needs. A static anvil (the release build) runs as
// it is; one built with cgo needs the host's dynamic loader and libraries,
// bound read-only under /run/anvil/lib and named to the loader.
func bridgeLoader(bridge string) (head []string, binds []string, err error) {
	f, err := elf.Open(bridge)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: read the bridge: %w", err)
	}
	defer f.Close()
	var interp string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				interp = strings.TrimRight(string(b), "\x00")
			}
		}
	}
	if interp == "" {
		return []string{sandboxBridge}, nil, nil
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: read the bridge: %w", err)
	}
	binds = []string{"--ro-bind", interp, sandboxLibs + "/ld.so"}
	for _, l := range libs {
		p, err := findLib(l)
		if err != nil {
			return nil, nil, err
		}
		binds = append(binds, "--ro-bind", p, sandboxLibs+"/"+l)
	}
	return []string{sandboxLibs + "/ld.so", "--library-path", sandboxLibs, sandboxBridge}, binds, nil
}

func findLib(name string) (string, error) {
	for _, d := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
		p := filepath.Join(d, name)
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r, nil
		}
	}
	return "", fmt.Errorf("sandbox: the bridge needs %s, which this host does not have", name)
}

// nsenterPath finds util-linux's nsenter, which enters a pod's namespaces.
func nsenterPath() (string, error) {
	for _, p := range []string{"/usr/bin/nsenter", "/bin/nsenter"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	p, err := exec.LookPath("nsenter")
	if err != nil {
		return "", errors.New("sandbox: nsenter (util-linux) is needed to run services")
	}
	return p, nil
}
