package api

// HubRunning lets the external tests wait until Run accepts streams.
func (s *Server) HubRunning() bool { return s.hub.running.Load() }
