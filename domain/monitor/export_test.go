package monitor

// TakeGeneralPath sends every check-in of ms down the general path.
func (ms *Service) TakeGeneralPath() { ms.generalOnly = true }

// FastCheckIns is how many check-ins the two-round-trip path stored.
func (ms *Service) FastCheckIns() int64 { return ms.fast.Load() }
