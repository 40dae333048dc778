// Results and geometry shared by preprocessing, postprocessing, the GStreamer plugin and
// applications (issue 4). Plain structs, no dependencies.
#pragma once

#include <string>
#include <vector>

namespace edgeinfer::vision {

/// An axis-aligned box in pixels, corners (x1, y1) top-left and (x2, y2) bottom-right.
struct Box {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  float width() const { return x2 - x1; }
  float height() const { return y2 - y1; }
  float area() const { return width() > 0 && height() > 0 ? width() * height() : 0.f; }
};

/// Intersection over union of two boxes (0 when either is empty).
float iou(const Box& a, const Box& b);

/// A point named by a detector (a face landmark, a pose keypoint).
struct Keypoint {
  float x = 0, y = 0;
  float score = 1.f;
};

struct Detection {
  Box box;  ///< in frame pixels (after mapping back through the transform)
  int classId = 0;
  float score = 0;
  std::string label;                ///< from the model config's labels file, "" if none
  std::vector<Keypoint> keypoints;  ///< e.g. BlazeFace's 6 face landmarks
  int batchIndex = 0;               ///< which frame of the batch
};

struct Classification {
  int classId = 0;
  float score = 0;
  std::string label;
};

/// How network-input pixels map to frame pixels:
///   frame_x = (tensor_x - offsetX) / scaleX + roiX, frame_y likewise.
/// Preprocessing returns it (resize, letterbox, crop); postprocessing uses it to put boxes
/// back into the frame.
struct Transform {
  float scaleX = 1, scaleY = 1;    ///< tensor pixels per frame pixel
  float offsetX = 0, offsetY = 0;  ///< letterbox padding, in tensor pixels
  float roiX = 0, roiY = 0;        ///< top-left of the crop/ROI in the frame
  float frameWidth = 0, frameHeight = 0;

  float toFrameX(float x) const { return (x - offsetX) / scaleX + roiX; }
  float toFrameY(float y) const { return (y - offsetY) / scaleY + roiY; }
  /// Maps a box from tensor pixels to frame pixels, clipped to the frame.
  Box toFrame(const Box& b) const;
};

}  // namespace edgeinfer::vision
