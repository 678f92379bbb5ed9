package project

import (
	"errors"
	"strings"

	"anvil/domain"
	"anvil/domain/netpolicy"
)

// applyNetworkList reads a network list into dst when it was given, in
// its canonical form (netpolicy.Normalize: the same reading as at every
// run), or refuses the field naming the bad entry (docs/network.md).
func applyNetworkList(errs *domain.FieldErrors, field string, in *[]string, dst *[]string) {
	if in != nil {
		norm, err := netpolicy.Normalize(*in)
		var ee *netpolicy.EntryError
		switch {
		case errors.Is(err, netpolicy.ErrTooMany):
			errs.Add(field, "too_many_network_entries", "holds more than %d entries", netpolicy.MaxEntries)
		case errors.As(err, &ee) && errors.Is(err, netpolicy.ErrUnknownPreset):
			errs.Add(field, "unknown_network_preset", "has a bad entry %s", ee.Error())
		case errors.As(err, &ee):
			errs.Add(field, "invalid_network_entry", "has a bad entry %s", ee.Error())
		case err != nil:
			errs.Add(field, "invalid_network_entry", "%s", err.Error())
		default:
			*dst = norm
		}
	}
	if *dst == nil {
		*dst = []string{}
	}
}

// networkWords is a network list as the audit log says it.
func networkWords(list []string) string {
	if len(list) == 0 {
		return "none (offline)"
	}
	return strings.Join(list, ", ")
}
