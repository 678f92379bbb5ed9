package domain

// DefaultStatusContext is the context of a project's commit statuses until
// someone sets another: anvil/<slug> (docs/webhooks.md, "Commit statuses").
func DefaultStatusContext(slug string) string { return "anvil/" + slug }

// StatusContextOf is the context p's commit statuses are posted under.
func StatusContextOf(p *Project) string {
	if p.StatusContext != "" {
		return p.StatusContext
	}
	return DefaultStatusContext(p.Slug)
}
