// Command mkpkg is `make package`: it builds the static binary of this
// checkout and packages it as dist/anvil_<version>_<arch>.deb and
// dist/anvil_<version>_<arch>.oci.tar (internal/packaging).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"anvil/internal/packaging"
)

func main() {
	out := flag.String("out", "dist", "folder to write the packages to")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH to build for")
	printVersion := flag.Bool("version", false, "print the version this checkout would be packaged as, and exit")
	debianRoot := flag.Bool("debian-root", false, "make (or find, when cached) the fresh Debian roots the package tests install into and boot, print their paths, and exit")
	flag.Parse()
	if *debianRoot {
		for _, make := range []func(context.Context, string) (string, error){packaging.DebianRoot, packaging.SystemdRoot} {
			path, err := make(context.Background(), packaging.DebianRootCache())
			if err != nil {
				fmt.Fprintln(os.Stderr, "mkpkg:", err)
				os.Exit(1)
			}
			fmt.Println(path)
		}
		return
	}
	if err := run(*out, *arch, *printVersion); err != nil {
		fmt.Fprintln(os.Stderr, "mkpkg:", err)
		os.Exit(1)
	}
}

func run(out, arch string, printVersion bool) error {
	ctx := context.Background()
	info, err := packaging.Describe(ctx, ".")
	if err != nil {
		return err
	}
	if printVersion {
		fmt.Println(info.Version)
		return nil
	}
	if info.Dirty {
		fmt.Fprintln(os.Stderr, "mkpkg: the tree has uncommitted changes: this build is marked +dirty and is not reproducible")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(out, fmt.Sprintf("anvil_%s_linux_%s", info.Version, arch))
	if err := packaging.BuildBinary(ctx, ".", bin, arch, info); err != nil {
		return err
	}
	deb, err := packaging.Deb(ctx, ".", bin, out, arch, info)
	if err != nil {
		return err
	}
	image := filepath.Join(out, fmt.Sprintf("anvil_%s_%s.oci.tar", info.Version, arch))
	digest, err := packaging.Image(bin, image, arch, info)
	if err != nil {
		return err
	}
	fmt.Printf("%s\n%s\n  image %s, tag %s\n", deb, image, digest, info.Tag())
	return nil
}
