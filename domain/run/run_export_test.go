package run

// LostRunsSQL is the lost-runner sweep's query, for the test of its plan.
const LostRunsSQL = lostRunsSQL

// TakeGeneralPath sends every acceptance group down its general path (the
// bun transaction of tryGroup), for the differential test; call it before
// the first acceptance.
func (q *Queue) TakeGeneralPath() { q.generalOnly = true }
