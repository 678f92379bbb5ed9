package web

import "github.com/labstack/echo/v4"

// registerRuns adds the queue, run and log pages and the run API: manual
// runs, cancels, reruns, logs and runs by number.
func (s *Server) registerRuns(_ *echo.Echo, pages, api *echo.Group) {
	pages.POST("/projects/:projectId/runs", s.runNowSubmit)
	pages.GET("/projects/:projectId/queue", s.projectQueueFragment)
	pages.GET("/projects/:projectId/runs/:number", s.runByNumberPage)
	pages.GET("/projects/:projectId/runs", s.runHistoryPage)
	pages.GET("/runs/:runId", s.runPage)
	pages.GET("/runs/:runId/log.txt", s.runLogText)
	pages.GET("/runs/:runId/patch.diff", s.runPatchText)
	pages.GET("/runs/:runId/network", s.runNetworkFragment)
	pages.POST("/runs/:runId/cancel", s.runCancelSubmit)
	pages.POST("/runs/:runId/rerun", s.runRerunSubmit)

	api.GET("/projects/:projectId/queue", s.apiQueue)
	api.POST("/projects/:projectId/runs", s.apiRunCreate)
	api.GET("/projects/:projectId/runs", s.apiRunHistory)
	api.GET("/runs/:runId", s.apiRunGet)
	api.POST("/runs/:runId/cancel", s.apiRunCancel)
	api.POST("/runs/:runId/rerun", s.apiRunRerun)
	api.GET("/runs/:runId/logs", s.apiRunLogs)
	api.GET("/runs/:runId/connections", s.apiRunConnections)
	api.GET("/runs/:runId/artifacts", s.apiRunArtifacts)
	api.GET("/runs/:runId/artifacts/*", s.apiRunArtifact)
	pages.GET("/runs/:runId/artifacts/*", s.apiRunArtifact)
}
