package wsync

/*
#include "shim.h"
*/
import "C"

// Compile-time checks that the constants of this package, written as numbers so that their
// documentation shows them, equal wsync.h's: converting a negative constant to uint does not
// compile, so a difference either way fails the build.
const (
	_ = uint(StatusOK-C.WSYNC_OK) + uint(C.WSYNC_OK-StatusOK)
	_ = uint(StatusInvalidArgument-C.WSYNC_ERR_INVALID_ARGUMENT) + uint(C.WSYNC_ERR_INVALID_ARGUMENT-StatusInvalidArgument)
	_ = uint(StatusNotFound-C.WSYNC_ERR_NOT_FOUND) + uint(C.WSYNC_ERR_NOT_FOUND-StatusNotFound)
	_ = uint(StatusVersionMismatch-C.WSYNC_ERR_VERSION_MISMATCH) + uint(C.WSYNC_ERR_VERSION_MISMATCH-StatusVersionMismatch)
	_ = uint(StatusUnsupported-C.WSYNC_ERR_UNSUPPORTED) + uint(C.WSYNC_ERR_UNSUPPORTED-StatusUnsupported)
	_ = uint(StatusTimeout-C.WSYNC_ERR_TIMEOUT) + uint(C.WSYNC_ERR_TIMEOUT-StatusTimeout)
	_ = uint(StatusAborted-C.WSYNC_ERR_ABORTED) + uint(C.WSYNC_ERR_ABORTED-StatusAborted)
	_ = uint(StatusProtocol-C.WSYNC_ERR_PROTOCOL) + uint(C.WSYNC_ERR_PROTOCOL-StatusProtocol)
	_ = uint(StatusIO-C.WSYNC_ERR_IO) + uint(C.WSYNC_ERR_IO-StatusIO)
	_ = uint(StatusPeerFailed-C.WSYNC_ERR_PEER_FAILED) + uint(C.WSYNC_ERR_PEER_FAILED-StatusPeerFailed)
	_ = uint(StatusOutOfMemory-C.WSYNC_ERR_OUT_OF_MEMORY) + uint(C.WSYNC_ERR_OUT_OF_MEMORY-StatusOutOfMemory)
	_ = uint(StatusInvalidState-C.WSYNC_ERR_INVALID_STATE) + uint(C.WSYNC_ERR_INVALID_STATE-StatusInvalidState)
	_ = uint(StatusEngine-C.WSYNC_ERR_ENGINE) + uint(C.WSYNC_ERR_ENGINE-StatusEngine)
	_ = uint(StatusInternal-C.WSYNC_ERR_INTERNAL) + uint(C.WSYNC_ERR_INTERNAL-StatusInternal)
	_ = uint(StatusNoDevice-C.WSYNC_ERR_NO_DEVICE) + uint(C.WSYNC_ERR_NO_DEVICE-StatusNoDevice)
	_ = uint(StatusRejected-C.WSYNC_ERR_REJECTED) + uint(C.WSYNC_ERR_REJECTED-StatusRejected)
	_ = uint(statusCount-C.WSYNC_STATUS_COUNT) + uint(C.WSYNC_STATUS_COUNT-statusCount)
	_ = uint(DtypeInvalid-C.WSYNC_DTYPE_INVALID) + uint(C.WSYNC_DTYPE_INVALID-DtypeInvalid)
	_ = uint(DtypeBool-C.WSYNC_DTYPE_BOOL) + uint(C.WSYNC_DTYPE_BOOL-DtypeBool)
	_ = uint(DtypeInt8-C.WSYNC_DTYPE_INT8) + uint(C.WSYNC_DTYPE_INT8-DtypeInt8)
	_ = uint(DtypeInt16-C.WSYNC_DTYPE_INT16) + uint(C.WSYNC_DTYPE_INT16-DtypeInt16)
	_ = uint(DtypeInt32-C.WSYNC_DTYPE_INT32) + uint(C.WSYNC_DTYPE_INT32-DtypeInt32)
	_ = uint(DtypeInt64-C.WSYNC_DTYPE_INT64) + uint(C.WSYNC_DTYPE_INT64-DtypeInt64)
	_ = uint(DtypeUint8-C.WSYNC_DTYPE_UINT8) + uint(C.WSYNC_DTYPE_UINT8-DtypeUint8)
	_ = uint(DtypeFloat16-C.WSYNC_DTYPE_FLOAT16) + uint(C.WSYNC_DTYPE_FLOAT16-DtypeFloat16)
	_ = uint(DtypeBfloat16-C.WSYNC_DTYPE_BFLOAT16) + uint(C.WSYNC_DTYPE_BFLOAT16-DtypeBfloat16)
	_ = uint(DtypeFloat32-C.WSYNC_DTYPE_FLOAT32) + uint(C.WSYNC_DTYPE_FLOAT32-DtypeFloat32)
	_ = uint(DtypeFloat64-C.WSYNC_DTYPE_FLOAT64) + uint(C.WSYNC_DTYPE_FLOAT64-DtypeFloat64)
	_ = uint(DtypeFloat8E4M3-C.WSYNC_DTYPE_FLOAT8_E4M3) + uint(C.WSYNC_DTYPE_FLOAT8_E4M3-DtypeFloat8E4M3)
	_ = uint(DtypeFloat8E5M2-C.WSYNC_DTYPE_FLOAT8_E5M2) + uint(C.WSYNC_DTYPE_FLOAT8_E5M2-DtypeFloat8E5M2)
	_ = uint(EventNone-C.WSYNC_EVENT_NONE) + uint(C.WSYNC_EVENT_NONE-EventNone)
	_ = uint(EventBucket-C.WSYNC_EVENT_BUCKET) + uint(C.WSYNC_EVENT_BUCKET-EventBucket)
	_ = uint(EventCommit-C.WSYNC_EVENT_COMMIT) + uint(C.WSYNC_EVENT_COMMIT-EventCommit)
	_ = uint(EventClosed-C.WSYNC_EVENT_CLOSED) + uint(C.WSYNC_EVENT_CLOSED-EventClosed)
	_ = uint(EventAborted-C.WSYNC_EVENT_ABORTED) + uint(C.WSYNC_EVENT_ABORTED-EventAborted)
	_ = uint(LogError-C.WSYNC_LOG_ERROR) + uint(C.WSYNC_LOG_ERROR-LogError)
	_ = uint(LogWarn-C.WSYNC_LOG_WARN) + uint(C.WSYNC_LOG_WARN-LogWarn)
	_ = uint(LogInfo-C.WSYNC_LOG_INFO) + uint(C.WSYNC_LOG_INFO-LogInfo)
	_ = uint(LogDebug-C.WSYNC_LOG_DEBUG) + uint(C.WSYNC_LOG_DEBUG-LogDebug)
	_ = uint(LogTrace-C.WSYNC_LOG_TRACE) + uint(C.WSYNC_LOG_TRACE-LogTrace)
	_ = uint(MaxNdim-C.WSYNC_MAX_NDIM) + uint(C.WSYNC_MAX_NDIM-MaxNdim)
)
