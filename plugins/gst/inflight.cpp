// InFlight: worker threads compute, one output thread finishes in order (inflight.h).
#include "inflight.h"

#include <algorithm>
#include <chrono>

namespace edgeinfer::gst {

InFlight::InFlight(int workers, Compute compute, Finish finish)
    : limit_(static_cast<size_t>(std::max(1, workers))),
      compute_(std::move(compute)),
      finish_(std::move(finish)) {
  for (size_t i = 0; i < limit_; ++i) workers_.emplace_back([this] { workerLoop(); });
  output_ = std::thread([this] { outputLoop(); });
}

InFlight::~InFlight() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : workers_) t.join();
  output_.join();
  queue_.clear();  // dropped: their destructors release what they hold
}

GstFlowReturn InFlight::submit(std::unique_ptr<Item> item) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto t0 = std::chrono::steady_clock::now();
  changed_.wait(lock, [&] {
    return queue_.size() < limit_ || flushing_ || stopping_ || flow_ != GST_FLOW_OK;
  });
  waitedMs_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (flushing_ || stopping_) return GST_FLOW_FLUSHING;  // `item` is destroyed: dropped
  if (flow_ != GST_FLOW_OK) {
    const GstFlowReturn ret = flow_;
    // Not linked: said once, as a push would say it; the next buffer tries again (the pad may
    // have been linked since).
    if (ret == GST_FLOW_NOT_LINKED) flow_ = GST_FLOW_OK;
    return ret;
  }
  Entry e;
  e.item = std::move(item);
  queue_.push_back(std::move(e));
  lock.unlock();
  changed_.notify_all();
  return GST_FLOW_OK;
}

void InFlight::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (std::this_thread::get_id() == output_.get_id()) {
    // Called from inside a Finish (downstream sent a flush or an event back up from the output
    // thread's push): nobody else pops the queue, so finish what is left here, in order.
    while (!queue_.empty() && !stopping_) {
      changed_.wait(lock, [&] { return stopping_ || queue_.front().done; });
      if (stopping_) break;
      finishFront(lock);
    }
    return;
  }
  changed_.wait(lock, [&] { return (queue_.empty() && !finishing_) || stopping_; });
}

void InFlight::resetFlow() {
  std::lock_guard<std::mutex> lock(mutex_);
  flow_ = GST_FLOW_OK;
}

void InFlight::setFlushing(bool flushing) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    flushing_ = flushing;
    if (!flushing) flow_ = GST_FLOW_OK;
  }
  changed_.notify_all();
}

double InFlight::waitedMs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waitedMs_;
}

void InFlight::workerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    Entry* next = nullptr;
    changed_.wait(lock, [&] {
      if (stopping_) return true;
      for (Entry& e : queue_)
        if (!e.started) {
          next = &e;
          return true;
        }
      return false;
    });
    if (stopping_) return;
    next->started = true;
    if (flushing_) {  // to be dropped: not worth an engine run
      next->done = true;
      changed_.notify_all();
      continue;
    }
    // Entries stay where they are until the output thread pops them, which it does only once
    // they are done: `next` stays valid while it is computed without the lock.
    lock.unlock();
    compute_(*next->item);
    lock.lock();
    next->done = true;
    changed_.notify_all();
  }
}

void InFlight::finishFront(std::unique_lock<std::mutex>& lock) {
  std::unique_ptr<Item> item = std::move(queue_.front().item);
  queue_.pop_front();
  const bool wasFinishing = finishing_;  // (drain() on the output thread: inside a Finish)
  finishing_ = true;
  const bool drop = flushing_ || flow_ != GST_FLOW_OK;
  lock.unlock();
  changed_.notify_all();  // a submit() may go on
  const GstFlowReturn ret = finish_(*item, drop);
  item.reset();
  lock.lock();
  finishing_ = wasFinishing;
  if (!drop && ret != GST_FLOW_OK && flow_ == GST_FLOW_OK) flow_ = ret;
  changed_.notify_all();
}

void InFlight::outputLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || (!queue_.empty() && queue_.front().done); });
    if (stopping_) return;
    finishFront(lock);
  }
}

}  // namespace edgeinfer::gst
