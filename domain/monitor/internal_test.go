package monitor

import (
	"errors"

	"anvil/domain"
)

func hasField(err error, field string) bool {
	var de *domain.Error
	if !errors.As(err, &de) {
		return false
	}
	for _, f := range de.Fields {
		if f.Field == field {
			return true
		}
	}
	return false
}
