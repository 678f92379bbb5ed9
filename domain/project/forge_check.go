package project

import (
	"context"
	"errors"
	"fmt"
	"time"

	"anvil/domain"
	"anvil/domain/forgeapi"
	"anvil/domain/repourl"
)

// checkAPIURL applies the checkout policy to a provider_api_url being saved
// (docs/forgeapi.md): anvil calls that address for "run the latest commit",
// commit statuses and repair pull requests, so one on a private address
// would let a project read the server's private network. It is refused
// (a field error beside pre's) unless ANVIL_CHECKOUT_ALLOW_LOCAL; a host
// that does not resolve is only warned about, as a repository's is. Every
// call checks again the address it connects to.
func (ps *Projects) checkAPIURL(ctx context.Context, in *ProjectInput, pre domain.FieldErrors, warnings []string) (domain.FieldErrors, []string) {
	raw := trimmed(in.ProviderAPIURL)
	if raw == "" {
		return pre, warnings
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := forgeapi.CheckAPIURL(ctx, ps.policy, raw)
	switch {
	case errors.Is(err, repourl.ErrLocal):
		pre.Add("provider_api_url", "private_provider_api_url", "is a private address, refused: %s", repourl.Detail(err))
	case errors.Is(err, repourl.ErrUnresolved):
		warnings = append(warnings, fmt.Sprintf("the forge's host %s does not resolve (yet); calls to it fail until it does", repourl.Detail(err)))
	}
	return pre, warnings
}
