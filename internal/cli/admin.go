package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// The operator's commands are "anvil admin NAME", one file each
// (admin_NAME.go); they share the opening of the app and the reading of a
// password.

// adminApp opens the app for an admin command: the configuration must have
// loaded (cerr) and be complete, and no worker starts.
func adminApp(ctx context.Context, cfg *Config, cerr error, stderr io.Writer) (*app, error) {
	if cerr != nil {
		return nil, cerr
	}
	if err := cfg.validate(true); err != nil {
		return nil, err
	}
	return newApp(ctx, cfg, stderr, false)
}

func readPassword(file string) (string, error) {
	var b []byte
	var err error
	if file != "" {
		b, err = os.ReadFile(file)
	} else {
		b, err = io.ReadAll(io.LimitReader(os.Stdin, 4096))
	}
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	pw = strings.TrimRight(pw, "\r")
	if pw == "" {
		return "", fmt.Errorf("%w: the password is empty (give --password-file or pipe it on standard input)", errUsage)
	}
	return pw, nil
}
