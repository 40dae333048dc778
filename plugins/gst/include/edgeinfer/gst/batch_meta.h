// EdgeInferBatchMeta: a batch of frames from several streams, as `edgemux` makes it (issue 5,
// multi-stream batching). A batch travels as one GstBuffer with caps EDGEINFER_BATCH_CAPS
// ("video/x-edgeinfer-batch"); the buffer holds no memory of its own, only this meta, which
// holds, per stream that delivered a frame, a reference to that frame's own GstBuffer, its caps,
// segment and timestamps. `edgeinfer` runs one inference call over the frames of a batch and
// attaches an EdgeInferMeta to each frame's buffer; `edgedemux` pushes each frame on its
// stream's pad with its own caps, segment and timestamps. Applications read it in a pad probe or
// an appsink on batch caps:
//
//   #include "edgeinfer/gst/batch_meta.h"              // link libedgeinfer-gstmeta
//   if (const EdgeInferBatchMeta* b = edgeinfer::gst::findBatchMeta(buffer))
//     for (const edgeinfer::gst::BatchFrame& f : b->batch->frames)
//       for (const EdgeInferMeta* m : edgeinfer::gst::bufferMetas(f.buffer))
//         use(f.streamId, f.pts, *m->results);
//
// Copying the batch buffer copies the meta: the copy refers to the same frame buffers (one more
// reference each), no pixels are copied.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <cstdint>
#include <vector>

/// The caps of batch buffers (no fields).
#define EDGEINFER_BATCH_CAPS "video/x-edgeinfer-batch"

namespace edgeinfer::gst {

/// One stream's frame in a batch. Owns a reference to `buffer` and `caps` (copies take
/// their own references).
struct BatchFrame {
  unsigned streamId = 0;        ///< the edgemux sink pad's index (sink_2: 2)
  GstBuffer* buffer = nullptr;  ///< the frame, as the stream delivered it (owned reference)
  GstCaps* caps = nullptr;      ///< the stream's caps for this frame (owned reference)
  GstVideoInfo info{};          ///< `caps` parsed
  GstSegment segment{};         ///< the stream's segment for this frame
  GstClockTime pts = GST_CLOCK_TIME_NONE;  ///< the frame's PTS (in `segment`)

  BatchFrame() = default;
  /// Takes `buffer` (transfer full); refs `caps`.
  BatchFrame(unsigned stream, GstBuffer* buffer, GstCaps* caps, const GstVideoInfo& info,
             const GstSegment& segment);
  BatchFrame(const BatchFrame& other);
  BatchFrame(BatchFrame&& other) noexcept;
  BatchFrame& operator=(BatchFrame other) noexcept;
  ~BatchFrame();

  /// Hands the frame's buffer over to the caller (transfer full); `buffer` is null after.
  GstBuffer* takeBuffer();
  /// Makes `buffer` writable (a copy that shares the pixel memory when another reference
  /// exists, gst_buffer_make_writable) so that metas can be added; returns it.
  GstBuffer* writableBuffer();

  friend void swap(BatchFrame& a, BatchFrame& b) noexcept;
};

/// What one batch holds.
struct Batch {
  uint64_t number = 0;             ///< the batch's index at the producing edgemux, from 0
  std::vector<BatchFrame> frames;  ///< at most one per stream, in stream order
  /// Streams that ended (EOS, all their frames delivered) since the previous batch: their
  /// pads in edgedemux get EOS. A batch may carry only this (no frames).
  std::vector<unsigned> endedStreams;
  /// Streams flushed on their own (flush-start and flush-stop on their edgemux sink pad, not a
  /// flush of every stream) since the previous batch: edgeinfer starts their state afresh and
  /// edgedemux flushes their pad (and sends their segment again) before their frames of this
  /// batch, which come after the flush. A batch may carry only this.
  std::vector<unsigned> flushedStreams;
};

}  // namespace edgeinfer::gst

/// The GstMeta. `batch` is owned by the meta (never null while the meta is attached).
struct EdgeInferBatchMeta {
  GstMeta meta;
  edgeinfer::gst::Batch* batch;
};

/// The meta API type ("EdgeInferBatchMetaAPI", no tags).
GType edgeinfer_batch_meta_api_get_type(void);
#define EDGEINFER_BATCH_META_API_TYPE (edgeinfer_batch_meta_api_get_type())
/// The registered implementation ("EdgeInferBatchMeta").
const GstMetaInfo* edgeinfer_batch_meta_get_info(void);

namespace edgeinfer::gst {

/// Adds a meta holding `batch` to a writable buffer.
EdgeInferBatchMeta* addBatchMeta(GstBuffer* buffer, Batch batch);
/// The buffer's batch meta, or null.
EdgeInferBatchMeta* findBatchMeta(GstBuffer* buffer);
/// Whether `caps` are batch caps (EDGEINFER_BATCH_CAPS).
bool isBatchCaps(const GstCaps* caps);

}  // namespace edgeinfer::gst
