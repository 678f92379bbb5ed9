package web

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"anvil/domain/feed"
	"anvil/domain/retention"
)

// registerRetention adds the retention policies to the private API and the
// settings page (docs/retention.md; docs/contracts/private-api.md).
func (s *Server) registerRetention(pages, api *echo.Group) {
	api.GET("/retention", s.apiRetentionGet)
	api.PUT("/retention", s.apiRetentionPut)
	api.GET("/projects/:projectId/retention", s.apiProjectRetentionGet)
	api.PUT("/projects/:projectId/retention", s.apiProjectRetentionPut)
	pages.GET("/settings/retention", s.retentionPage)
	pages.POST("/settings/retention", s.retentionSubmit)
	pages.POST("/settings/retention/projects/:projectId", s.retentionProjectSubmit)
}

func (s *Server) apiRetentionGet(c echo.Context) error {
	d, err := s.retention.OrgPolicy(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (s *Server) apiRetentionPut(c echo.Context) error {
	var in retention.Document
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	d, err := s.retention.PutOrgPolicy(c.Request().Context(), principal(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (s *Server) apiProjectRetentionGet(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	d, err := s.retention.ProjectPolicy(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (s *Server) apiProjectRetentionPut(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	var in retention.Document
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	d, err := s.retention.PutProjectPolicy(c.Request().Context(), principal(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// budgetError is the native door's answer over the daily budget.
type budgetError struct {
	Error    string    `json:"error"`
	Message  string    `json:"message"`
	Budget   int64     `json:"daily_event_budget"`
	Used     int64     `json:"used_today"`
	ResetsAt time.Time `json:"resets_at"`
}

// overBudget counts a request's n events against its project's daily
// budget (docs/contracts/feed.md, "Order of the checks": after the parse).
// Over it, the whole request is refused with 429 and Retry-After until the
// next UTC midnight; the Sentry door adds Sentry's rate-limit header.
func (s *Server) overBudget(c echo.Context, snd *feed.FeedSender, n int, sentryDoor bool) (bool, error) {
	rf := s.retention.Budget().Admit(c.Request().Context(), snd.OrgID, snd.ProjectID, n)
	if rf == nil {
		return false, nil
	}
	secs := strconv.FormatInt(int64(rf.RetryAfter/time.Second), 10)
	h := c.Response().Header()
	h.Set("Retry-After", secs)
	if sentryDoor {
		// Sentry's documented header: retry_after:categories:scope:reason_code
		// (no categories: every one).
		h.Set("X-Sentry-Rate-Limits", secs+"::project:daily_event_budget")
		return true, c.JSON(http.StatusTooManyRequests, sentryDetail{Detail: fmt.Sprintf("daily_event_budget: %s", rf.Error())})
	}
	return true, c.JSON(http.StatusTooManyRequests, budgetError{Error: "daily_event_budget", Message: rf.Error(),
		Budget: rf.Budget, Used: rf.Used, ResetsAt: rf.ResetsAt})
}
