package sharding

// SetClaimsForTest makes m claim exactly the given ranges (owned, every
// other range free) and tells its selected caches, as a lease round that
// changes the claims does: a test of package sharding_test drives the
// claims of a selected cache with it, without Leases or a clock.
func (m *Member) SetClaimsForTest(ranges ...int) { setClaims(m, ranges...) }
