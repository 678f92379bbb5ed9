package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/views"
)

// feedProps reads a project's connections and bindings for its feed page.
func (s *Server) feedProps(c echo.Context) (views.FeedProps, error) {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return views.FeedProps{}, err
	}
	p := principal(c)
	ctx := c.Request().Context()
	pr, err := s.Projects.Get(ctx, p.OrgID, id)
	if err != nil {
		return views.FeedProps{}, err
	}
	cs, err := s.Feed.ListConnections(ctx, p, id)
	if err != nil {
		return views.FeedProps{}, err
	}
	bs, err := s.Feed.ListBindings(ctx, p, id)
	if err != nil {
		return views.FeedProps{}, err
	}
	props := views.FeedProps{Page: s.page(c, pr.Name+" · Feed", "projects"), ProjectID: pr.ID.String(), ProjectName: pr.Name,
		IngestURL: strings.TrimRight(s.opts.PublicURL, "/") + "/api/feed/events", CanWrite: p.CanWrite(), BindingPolicy: domain.PolicyObserve}
	outcomes, err := s.connectionOutcomes(ctx, cs)
	if err != nil {
		return views.FeedProps{}, err
	}
	for _, cn := range cs {
		row := views.FeedConnectionRow{ID: cn.ID.String(), Name: cn.Name, Prefix: cn.Prefix, CreatedAt: cn.CreatedAt, Revoked: cn.RevokedAt != nil,
			Outcome: outcomes[cn.ID]}
		if cn.LastUsedAt != nil {
			row.LastUsedAt = *cn.LastUsedAt
		}
		props.Connections = append(props.Connections, row)
	}
	for _, b := range bs {
		props.Bindings = append(props.Bindings, views.FeedBindingRow{Environment: b.Environment, RepairPolicy: b.RepairPolicy})
	}
	cards, err := s.Cards.ForProjects(ctx, []uuid.UUID{pr.ID}) // Projects.Get has checked the organisation
	if err != nil {
		return views.FeedProps{}, err
	}
	if card := cards[pr.ID]; card.External && card.ConfigID != nil {
		props.Card = views.FeedCardProps{External: true, IngestURL: s.cardIngestURL(p.OrgSlug, *card.ConfigID)}
	}
	return props, nil
}

// cardIngestURL is where an external producer replaces a card.
func (s *Server) cardIngestURL(orgSlug string, configID uuid.UUID) string {
	return strings.TrimRight(s.opts.PublicURL, "/") + "/api/ingest/dashboard/" + url.PathEscape(orgSlug) + "/" + configID.String() + "/incidents"
}

// feedCardSubmit hands the project's production card to an external
// producer (a fresh token, shown once; an earlier one stops working) or
// back to the incident store: the card section alone under htmx, the page
// without.
func (s *Server) feedCardSubmit(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	var external bool
	switch c.FormValue("external") {
	case "true":
		external = true
	case "false":
	default:
		return domain.Invalid("invalid_external", `"external" must be true (hand the card to an external producer) or false (back to the incident store)`)
	}
	p := principal(c)
	cfg, err := s.Cards.SetExternal(c.Request().Context(), p, id, external)
	if err != nil {
		return err
	}
	props, err := s.feedProps(c)
	if err != nil {
		return err
	}
	if cfg.Token != "" {
		props.Card = views.FeedCardProps{External: true, IngestURL: s.cardIngestURL(p.OrgSlug, cfg.ConfigID), NewToken: cfg.Token}
		c.Response().Header().Set("Cache-Control", "no-store")
	}
	if isHTMX(c) {
		return Render(c, http.StatusOK, views.FeedCardSection(props))
	}
	return Render(c, http.StatusOK, views.FeedPage(props))
}

// feedPage: GET /projects/:projectId/feed.
func (s *Server) feedPage(c echo.Context) error {
	props, err := s.feedProps(c)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.FeedPage(props))
}

// refusal splits a client's refusal (shown on the page) from a failure.
func refusal(err error) (*domain.Error, error) {
	var de *domain.Error
	if err != nil && errors.As(err, &de) && de.Kind != domain.ErrNotFound {
		return de, nil
	}
	return nil, err
}

// feedConnectionCreateSubmit shows the page again with the new token, once.
func (s *Server) feedConnectionCreateSubmit(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	conn, tok, err := s.Feed.CreateConnection(c.Request().Context(), principal(c), id, c.FormValue("name"))
	de, err := refusal(err)
	if err != nil {
		return err
	}
	props, err := s.feedProps(c)
	if err != nil {
		return err
	}
	if de != nil {
		props.Error = de.Message
		return Render(c, statusOf(de.Kind), views.FeedPage(props))
	}
	props.NewToken = tok
	if props.NewDSN, err = s.connectionDSN(c, conn.ProjectID, tok); err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return Render(c, http.StatusCreated, views.FeedPage(props))
}

// feedConnectionRevokeSubmit revokes (htmx with hx-confirm, or a plain form).
func (s *Server) feedConnectionRevokeSubmit(c echo.Context) error {
	if _, err := pathUUID(c, "projectId", "project"); err != nil {
		return err
	}
	cid, err := pathUUID(c, "connectionId", "connection")
	if err != nil {
		return err
	}
	projectID, err := s.Feed.RevokeConnection(c.Request().Context(), principal(c), cid)
	if err != nil {
		return err
	}
	return redirect(c, "/projects/"+projectID.String()+"/feed")
}

// feedBindingSubmit adds or changes a binding.
func (s *Server) feedBindingSubmit(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	env, policy := c.FormValue("environment"), c.FormValue("repair_policy")
	_, err = s.Feed.PutBinding(c.Request().Context(), principal(c), id, env, policy)
	de, err := refusal(err)
	if err != nil {
		return err
	}
	if de != nil {
		props, perr := s.feedProps(c)
		if perr != nil {
			return perr
		}
		props.Error, props.BindingEnv, props.BindingPolicy = de.Message, env, policy
		return Render(c, statusOf(de.Kind), views.FeedPage(props))
	}
	return redirect(c, "/projects/"+id.String()+"/feed")
}

// feedBindingDeleteSubmit removes a binding.
func (s *Server) feedBindingDeleteSubmit(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	if err := s.Feed.DeleteBinding(c.Request().Context(), principal(c), id, c.FormValue("environment")); err != nil {
		return err
	}
	return redirect(c, "/projects/"+id.String()+"/feed")
}
