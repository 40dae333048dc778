// How edgeinfer keeps several engine runs in flight (its in-flight property): work items
// (buffers to run through the model) are computed on worker threads, several at once, and
// finished (metas attached, the buffer pushed downstream) in the order they were submitted, on
// an output thread of their own; what DeepStream's nvinfer does with its input and output
// threads. So the engine run of one batch overlaps the decoding, the metas and the push of the
// one before, and the streaming thread only waits when every worker is busy.
//
// Not tied to edgeinfer's buffers: an Item is anything; Compute and Finish are the element's.
//   InFlight q(2, compute, finish);      // threads start here
//   q.submit(std::move(item));           // streaming thread; waits while 2 are in flight
//   q.drain();                           // before a serialized event (EOS, caps, segment ...)
//   q.setFlushing(true) ... q.drain(); q.setFlushing(false);   // FLUSH_START ... FLUSH_STOP
#pragma once

#include <gst/gst.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace edgeinfer::gst {

class InFlight {
 public:
  struct Item {
    virtual ~Item() = default;
  };
  /// Runs on a worker thread, several at once (one per worker).
  using Compute = std::function<void(Item&)>;
  /// Runs on the output thread, one item at a time in submit order, once the item is computed.
  /// `drop`: the item is to be dropped (flushing, stopping, or an earlier item's flow was not
  /// OK): release it without pushing. Returns the downstream flow of its push.
  using Finish = std::function<GstFlowReturn(Item&, bool drop)>;

  /// Starts `workers` worker threads (at least 1) and the output thread. At most `workers`
  /// items are in flight (computing, or computed and waiting to be finished).
  InFlight(int workers, Compute compute, Finish finish);
  /// Stops: items being computed are finished computing, then every item left is dropped
  /// (Finish is not called for them; they are destroyed).
  ~InFlight();
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

  /// Queues `item`, first waiting while `workers` items are in flight. Returns GST_FLOW_OK, or
  /// (dropping `item`) GST_FLOW_FLUSHING while flushing, or the first flow other than OK an
  /// earlier item's Finish returned (an error, EOS, not-linked ...; items after it are dropped
  /// until resetFlow() or a flush; not-linked is returned once).
  GstFlowReturn submit(std::unique_ptr<Item> item);
  /// Waits until every submitted item has been finished (pushed or dropped). Called from the
  /// output thread itself (an event sent back from downstream during a push), it finishes
  /// them there.
  void drain();
  /// While flushing, submit() refuses items, items not yet computed are not computed, and
  /// computed items are finished with drop=true. Leaving it (flush-stop) also forgets an
  /// earlier item's flow.
  void setFlushing(bool flushing);
  /// Forgets an earlier item's flow (a new stream or segment: EOS from downstream is over).
  void resetFlow();
  /// Milliseconds submit() has waited for a free worker so far.
  double waitedMs() const;

 private:
  struct Entry {
    std::unique_ptr<Item> item;
    bool started = false;
    bool done = false;
  };
  void workerLoop();
  void outputLoop();
  /// Pops the front item (done) and finishes it with the lock released.
  void finishFront(std::unique_lock<std::mutex>& lock);

  const size_t limit_;
  Compute compute_;
  Finish finish_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // every change of the state below
  std::deque<Entry> queue_;          // submit order; popped when finished
  bool finishing_ = false;           // an item popped from queue_ is being finished
  bool flushing_ = false;
  bool stopping_ = false;
  GstFlowReturn flow_ = GST_FLOW_OK;
  double waitedMs_ = 0.0;
  std::vector<std::thread> workers_;
  std::thread output_;
};

}  // namespace edgeinfer::gst
