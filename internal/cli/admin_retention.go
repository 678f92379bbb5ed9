package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"anvil/jobs"
)

func init() {
	register(&command{name: "admin retention", usage: "--now [--json]",
		summary: "run one retention clean-up at once and print what it removed",
		about: "Runs one retention clean-up of every organisation at once (the periodic job's work, in the\n" +
			"same bounded batches) and prints what it removed (docs/retention.md).",
		setup: func(fs *flag.FlagSet, _ *Config) func(context.Context, *invocation) error {
			now := fs.Bool("now", false, "run the clean-up now (required)")
			asJSON := fs.Bool("json", false, "print the report as one JSON object")
			return func(ctx context.Context, x *invocation) error {
				if !*now {
					return fmt.Errorf("%w: --now is required (the clean-up otherwise runs every %s in the workers)", errUsage, jobs.RetentionCleanupEvery)
				}
				return retentionNow(ctx, x, *asJSON)
			}
		}})
}

func retentionNow(ctx context.Context, x *invocation, asJSON bool) error {
	a, err := adminApp(ctx, x.cfg, x.cerr, x.stderr)
	if err != nil {
		return err
	}
	defer a.close()
	rep, err := a.Services.Retention.Cleanup(ctx)
	if asJSON {
		if jerr := json.NewEncoder(x.stdout).Encode(rep); jerr != nil {
			return jerr
		}
		return err
	}
	for _, sc := range rep.Scopes {
		name := sc.OrgSlug
		if sc.ProjectSlug != "" {
			name += "/" + sc.ProjectSlug
		}
		fmt.Fprintf(x.stdout, "%s: %s\n", name, sc.Removed)
	}
	fmt.Fprintf(x.stdout, "removed in all: %s (%s)\n", rep.Total, time.Since(rep.Started).Round(time.Millisecond))
	return err
}
