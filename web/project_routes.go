package web

import "github.com/labstack/echo/v4"

// registerProjects adds the project pages and the project API.
func (s *Server) registerProjects(_ *echo.Echo, pages, api *echo.Group) {
	pages.GET("/projects", s.projectsPage)
	pages.GET("/projects/new", s.projectNewPage)
	pages.POST("/projects", s.projectCreateSubmit)
	pages.GET("/projects/:projectId", s.projectPage)
	pages.GET("/projects/:projectId/edit", s.projectEditPage)
	pages.POST("/projects/:projectId/edit", s.projectEditSubmit)

	api.GET("/projects", s.apiProjectList)
	api.POST("/projects", s.apiProjectCreate)
	api.GET("/projects/:projectId", s.apiProjectGet)
	api.PATCH("/projects/:projectId", s.apiProjectUpdate)
}
