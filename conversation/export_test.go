package conversation

// Waiting reports whether a wait on decision id is parked in this
// service, so a test can tell that an executor's wait is this service's.
func (s *Service) Waiting(id string) bool {
	_, ok := s.waiters.Load(id)
	return ok
}
