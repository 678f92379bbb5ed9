package web

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/views"
)

// dashboard is the portfolio: one card per project with its production
// card, last run, queue depth and 24-hour sparkline. ?fragment=cards
// answers the live grid only (re-read on every card and run event).
func (s *Server) dashboard(c echo.Context) error {
	p := principal(c)
	ctx := c.Request().Context()
	sums, err := s.Projects.Summaries(ctx, p.OrgID)
	if err != nil {
		return err
	}
	ids := make([]uuid.UUID, 0, len(sums))
	for _, sm := range sums {
		ids = append(ids, sm.ID)
	}
	cards, err := s.Cards.ForProjects(ctx, ids)
	if err != nil {
		return err
	}
	props := views.DashboardProps{Page: s.page(c, "Dashboard", "dashboard"), CanWrite: p.AtLeast(domain.RoleAdmin)}
	for _, sm := range sums {
		hourly, err := s.Incidents.ProjectHourly(ctx, sm.ID)
		if err != nil {
			return err
		}
		card := cards[sm.ID]
		pc := views.ProjectCard{ID: sm.ID.String(), Slug: sm.Slug, Name: sm.Name, DefaultBranch: sm.DefaultBranch,
			LastStatus: sm.LastStatus, QueueDepth: sm.QueueDepth, Source: card.Source, External: card.External, Hourly: hourly}
		for i, ci := range card.Incidents {
			row := views.CardIncidentRow{ID: ci.ID, Title: ci.Title, State: ci.State, Since: ci.Since}
			// anvil's own incidents link to their page and say what they are
			// (NEEDS_HUMAN is OPEN on the card's four states, seed 004).
			if id, err := uuid.Parse(ci.ID); err == nil && !card.External && i < 5 {
				if inc, err := s.Incidents.Get(ctx, p.OrgID, id); err == nil {
					row.Href, row.Status = "/incidents/"+id.String(), inc.Status
				}
			}
			pc.Incidents = append(pc.Incidents, row)
		}
		props.Cards = append(props.Cards, pc)
	}
	if c.QueryParam("fragment") == "cards" {
		return Render(c, http.StatusOK, views.DashboardCards(props))
	}
	return Render(c, http.StatusOK, views.Dashboard(props))
}
