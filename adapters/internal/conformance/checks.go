package conformance

import "time"

// Check names, for Known tables.
const (
	CreateStreamWaitsForReply        = "CreateStreamWaitsForReply"
	HeadersCarried                   = "HeadersCarried"
	HandlerErrorRejects              = "HandlerErrorRejects"
	ReplySentAfterReply              = "ReplySentAfterReply"
	CloseIsHalfClose                 = "CloseIsHalfClose"
	ResetSeenByPeer                  = "ResetSeenByPeer"
	ConnectionCloseResetsAll         = "ConnectionCloseResetsAll"
	CreateStreamAfterConnClosed      = "CreateStreamAfterConnClosed"
	PendingCreateStreamFailsPromptly = "PendingCreateStreamFailsPromptly"
	IdleTimeoutCloses                = "IdleTimeoutCloses"
	RemoveStreamsByID                = "RemoveStreamsByID"
	Identifiers                      = "Identifiers"
	DataBeforeResetDelivered         = "DataBeforeResetDelivered"
	DataBeforeConnCloseDelivered     = "DataBeforeConnCloseDelivered"
	ZeroLengthWrite                  = "ZeroLengthWrite"
	LargeWrite                       = "LargeWrite32MiB"
	Concurrent64x1MiB                = "Concurrent64x1MiB"
	SlowReaderIsolation              = "SlowReaderIsolation"
	FlowControlBound                 = "FlowControlBound"
)

// Checks returns the suite.
func Checks() []Check {
	return []Check{
		{Name: CreateStreamWaitsForReply, Handler: slowHandler, Run: runCreateStreamWaits},
		{Name: HeadersCarried, Run: runHeadersCarried},
		{Name: HandlerErrorRejects, Handler: rejectHandler, Run: runHandlerErrorRejects},
		{Name: ReplySentAfterReply, Handler: replySentHandler, Run: runReplySentAfterReply},
		{Name: CloseIsHalfClose, Run: runCloseIsHalfClose},
		{Name: ResetSeenByPeer, Run: runResetSeenByPeer},
		{Name: ConnectionCloseResetsAll, Run: runConnectionCloseResetsAll},
		{Name: CreateStreamAfterConnClosed, Run: runCreateStreamAfterConnClosed},
		{Name: PendingCreateStreamFailsPromptly, Handler: blockingHandler, Run: runPendingCreateStream},
		{Name: IdleTimeoutCloses, Run: runIdleTimeout},
		{Name: RemoveStreamsByID, Run: runRemoveStreams},
		{Name: Identifiers, Run: runIdentifiers},
		{Name: DataBeforeResetDelivered, Run: runDataBeforeReset},
		{Name: DataBeforeConnCloseDelivered, Run: runDataBeforeConnClose},
		{Name: ZeroLengthWrite, Run: runZeroLengthWrite},
		{Name: LargeWrite, Run: runLargeWrite, Timeout: 90 * time.Second},
		{Name: Concurrent64x1MiB, Run: runConcurrent, Timeout: 120 * time.Second},
		{Name: SlowReaderIsolation, Run: runSlowReaderIsolation, Timeout: 90 * time.Second},
		{Name: FlowControlBound, Run: runFlowControlBound},
	}
}
