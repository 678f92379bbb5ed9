package web

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/views"
)

// auditKinds are offered by the audit page's filter.
var auditKinds = []string{domain.AuditMemberAdded, domain.AuditMemberRemoved, domain.AuditMemberRoleChanged,
	domain.AuditInvitationCreated, domain.AuditInvitationUsed, domain.AuditInvitationRevoked,
	domain.AuditPasswordChanged, domain.AuditPasswordReset, domain.AuditTokenCreated, domain.AuditTokenRevoked,
	domain.AuditWebhookCreated, domain.AuditWebhookDeleted, domain.AuditWebhookRotated, domain.AuditDeliveryEvaluated,
	domain.AuditConnectionCreated, domain.AuditConnectionRevoked, domain.AuditBindingChanged,
	domain.AuditConnectionOriginsChanged, domain.AuditCardExternal, domain.AuditProjectCreated, domain.AuditProjectUpdated,
	domain.AuditProjectDeleted, domain.AuditOrganizationCreated, domain.AuditAlertDestinationCreated,
	domain.AuditAlertDestinationUpdated, domain.AuditAlertDestinationDeleted, domain.AuditAlertDestinationTested}

func auditQuery(c echo.Context) (domain.AuditQuery, error) {
	q := domain.AuditQuery{Actor: c.QueryParam("actor"), Kind: c.QueryParam("kind")}
	if b := c.QueryParam("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return q, domain.Invalid("invalid_cursor", "before must be the id of an entry (a positive integer)")
		}
		q.Before = n
	}
	return q, nil
}

func (s *Server) apiAudit(c echo.Context) error {
	q, err := auditQuery(c)
	if err != nil {
		return err
	}
	pg, err := s.Audit.List(c.Request().Context(), principal(c), q)
	if err != nil {
		return err
	}
	out := map[string]any{"entries": pg.Entries}
	if out["entries"] == nil || len(pg.Entries) == 0 {
		out["entries"] = []domain.AuditEntry{}
	}
	if pg.NextBefore > 0 {
		out["next_before"] = pg.NextBefore
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) auditPage(c echo.Context) error {
	q, err := auditQuery(c)
	if err != nil {
		return err
	}
	pg, err := s.Audit.List(c.Request().Context(), principal(c), q)
	if err != nil {
		return err
	}
	props := views.AuditProps{Page: s.page(c, "Audit log", "members"), Actor: q.Actor, Kind: q.Kind, Kinds: auditKinds}
	for _, e := range pg.Entries {
		d := domain.AuditWords(e)
		props.Entries = append(props.Entries, views.AuditRow{At: e.At, ActorEmail: e.ActorEmail, Kind: e.Kind, Target: e.Target, Detail: d})
	}
	if pg.NextBefore > 0 {
		v := url.Values{"before": {strconv.FormatInt(pg.NextBefore, 10)}}
		if q.Actor != "" {
			v.Set("actor", q.Actor)
		}
		if q.Kind != "" {
			v.Set("kind", q.Kind)
		}
		props.NextPage = "/settings/audit?" + v.Encode()
	}
	return Render(c, http.StatusOK, views.Audit(props))
}
