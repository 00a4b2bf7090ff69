package mux

import "github.com/wsmux/wsmux/mux/internal/engine"

// The engine's abuse budgets, which the hostile-peer tests cross.
const (
	pingRate          = engine.PingRate
	pingOutBurst      = engine.PingOutBurst
	maxQueuedPingAcks = engine.MaxQueuedPingAcks
	maxUrgent         = engine.MaxUrgent
	budgetWindow      = engine.BudgetWindow
	maxYoungResets    = engine.MaxYoungResets
	maxUseless        = engine.MaxUseless
)
