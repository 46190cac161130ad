package owner

// probeReplicas asks Redis, at each poll, to find its replicas back while the last
// write's WAIT found too few of them (fallback.Store.ProbeReplicas). Only a write's WAIT
// can find them, and a node with nothing to write would otherwise stay unhealthy for
// good: counters not in memory refused to reads, allows answered by the fail policy.
// A node with writes Redis has not confirmed does not probe: sending them again finds
// the replicas, and health comes back only once they are confirmed, so that nothing is
// loaded from a Redis that a failover left without them. The caller holds mu; done
// comes later, never before ProbeReplicas returns.
func (o *Owner) probeReplicas() {
	if o.cfg.Redis == nil || o.probing || o.cfg.Redis.Healthy() || o.Unwritten() > 0 {
		return
	}
	o.probing = true
	now := o.cfg.Clock.Since().Milliseconds()
	o.ask(func() {
		o.cfg.Redis.ProbeReplicas(now, func(error) {
			o.post(func() { o.probing = false })
		})
	})
}
