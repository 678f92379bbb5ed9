package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/alert"
	"anvil/views"
)

func (s *Server) alertsProps(c echo.Context) (views.AlertsProps, error) {
	p := principal(c)
	ctx := c.Request().Context()
	ds, err := s.alerts.List(ctx, p)
	if err != nil {
		return views.AlertsProps{}, err
	}
	props := views.AlertsProps{Page: s.page(c, "Alerts", "alerts"), CanManage: p.AtLeast(domain.RoleAdmin), MailConfigured: s.alerts.Mail != nil}
	waitFor, waitDest, waitQuery := awaitedTest(c, time.Now())
	for _, d := range ds {
		row := views.AlertDestinationRow{ID: d.ID.String(), Name: d.Name, Kind: d.Kind, URL: d.URLHint, Failing: d.Failing}
		if d.Kind == alert.KindEmail {
			row.URL = strings.Join(d.Recipients, ", ")
		}
		log, err := s.alerts.Deliveries(ctx, p, d.ID)
		if err != nil {
			return props, err
		}
		for _, l := range log[:min(len(log), 10)] {
			r := views.AlertDeliveryRow{Kind: l.Kind, Status: l.Status, Error: l.Error, Answer: l.Answer, At: l.At}
			if l.StatusCode != nil {
				r.StatusCode = strconv.Itoa(*l.StatusCode)
			}
			if l.LatencyMS != nil {
				r.Latency = fmt.Sprintf("%d ms", *l.LatencyMS)
			}
			row.Deliveries = append(row.Deliveries, r)
		}
		if waitFor != "" && waitDest == d.ID.String() {
			row.Waiting = waitQuery
			for _, l := range log {
				if l.MessageID == waitFor && l.Status != "sending" {
					row.Waiting = ""
					break
				}
			}
		}
		props.Destinations = append(props.Destinations, row)
	}
	return props, nil
}

// testWait bounds how long the page waits for a test alert's line.
const testWait = time.Minute

// awaitedTest reads the test alert the page waits for (?tested=DEST&msg=ID&sent=UNIX,
// set by alertTestSubmit): nothing once testWait has passed.
func awaitedTest(c echo.Context, now time.Time) (msg, dest, query string) {
	msg, dest = c.QueryParam("msg"), c.QueryParam("tested")
	sent, err := strconv.ParseInt(c.QueryParam("sent"), 10, 64)
	if msg == "" || dest == "" || err != nil || len(msg) > 64 || now.Sub(time.Unix(sent, 0)) > testWait {
		return "", "", ""
	}
	q := url.Values{"tested": {dest}, "msg": {msg}, "sent": {strconv.FormatInt(sent, 10)}}
	return msg, dest, q.Encode()
}

func (s *Server) alertsPage(c echo.Context) error {
	props, err := s.alertsProps(c)
	if err != nil {
		return err
	}
	if c.QueryParam("part") == "deliveries" {
		for _, d := range props.Destinations {
			if d.ID == c.QueryParam("destination") {
				return Render(c, http.StatusOK, views.AlertDeliveries(d))
			}
		}
		return domain.NotFound("destination")
	}
	var rev tokenReveal
	if _, err := s.takeReveal(c, "alert-secret", &rev); err != nil {
		return err
	}
	props.NewSecret = rev.Token
	return Render(c, http.StatusOK, views.Alerts(props))
}

func (s *Server) alertCreateSubmit(c echo.Context) error {
	name, kind, url, rcpts := c.FormValue("name"), c.FormValue("kind"), c.FormValue("url"), c.FormValue("recipients")
	in := alert.Input{Name: &name, Kind: &kind, URL: &url}
	if kind == alert.KindEmail {
		// One field, addresses split on commas, semicolons and blanks;
		// the domain checks each (and their number).
		list := strings.FieldsFunc(rcpts, func(r rune) bool { return r == ',' || r == ';' || unicode.IsSpace(r) })
		in.URL, in.Recipients = nil, &list
	}
	_, sec, err := s.alerts.Create(c.Request().Context(), principal(c), in)
	var de *domain.Error
	if err != nil && !errors.As(err, &de) {
		return err
	}
	if de != nil {
		props, err := s.alertsProps(c)
		if err != nil {
			return err
		}
		props.Error = de.Message
		props.Form = views.AlertForm{Name: name, Kind: kind, URL: url, Recipients: rcpts}
		return Render(c, statusOf(de.Kind), views.Alerts(props))
	}
	if sec != "" {
		if err := s.stashReveal(c, "alert-secret", tokenReveal{Token: sec}); err != nil {
			return err
		}
	}
	return redirect(c, "/settings/alerts")
}

func (s *Server) alertTestSubmit(c echo.Context) error {
	id, err := pathUUID(c, "destinationId", "destination")
	if err != nil {
		return err
	}
	msg, err := s.alerts.Test(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	// The page waits for the test's line and shows it without a reload.
	q := url.Values{"tested": {id.String()}, "msg": {msg}, "sent": {strconv.FormatInt(time.Now().Unix(), 10)}}
	return redirect(c, "/settings/alerts?"+q.Encode()+"#deliveries-"+id.String())
}

func (s *Server) alertDeleteSubmit(c echo.Context) error {
	id, err := pathUUID(c, "destinationId", "destination")
	if err != nil {
		return err
	}
	if err := s.alerts.Delete(c.Request().Context(), principal(c), id); err != nil {
		return err
	}
	return redirect(c, "/settings/alerts")
}
