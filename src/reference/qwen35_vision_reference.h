// The float64 reference of Qwen3.5's vision tower (model.visual.*): the
// oracle for image features, as qwen35_reference.h is for the text model.
//
// One readable pass from preprocessed pixels to the features that replace
// the <|image_pad|> embeddings: Conv3d patch embedding (a matmul), the
// learned position table resampled bilinearly to each image, `depth`
// pre-norm ViT blocks with 2-D rotary and bidirectional attention inside each
// image (frame), then the 2x2 patch merger. shared/golden/vision/README.md
// section 2.2 has the math; the code follows it step by step.
//
// Usage:
//   VisionReference vision(*Checkpoint::open(dir));
//   Matrix64 features = vision.encode(pixel_values, {{1, 4, 6}});  // [6][out_hidden]
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "reference/qwen35_reference.h"
#include "vision/mrope_positions.h"

namespace deltagen {

// Optional intermediate values of one encode() call, every image's rows
// concatenated in input order ([N] = all patches).
struct VisionTrace {
  Matrix64 patch_embed;  // [N][D]: the Conv3d output (bias included)
  Matrix64 pos_embed;    // [N][D]: the resampled position embedding added to it
  std::vector<std::array<int64_t, 2>> rot_positions;  // [N]: (row, col) patch coordinates of the 2-D rotary
  std::vector<Matrix64> blocks;  // [depth] x [N][D]: each block's output
};

class VisionReference {
 public:
  // Loads the visual.* tensors as fp64. Throws Error naming the checkpoint
  // folder when it has no vision tower.
  explicit VisionReference(const Checkpoint& ckpt);

  const VisionConfig& config() const { return v_; }

  // pixel_values [N][in_channels * temporal_patch * patch * patch], the
  // processor's rows (merge-block-major per image, images one after
  // another), with N = sum of t * h * w over `grids`. Returns the image
  // features [sum of t * h * w / merge^2][out_hidden]: image k's rows
  // follow image k-1's, each in raster order of its merged grid. Throws
  // Error when the shapes disagree.
  Matrix64 encode(const Matrix64& pixel_values, const std::vector<ImageGrid>& grids,
                  VisionTrace* trace = nullptr) const;

 private:
  struct Affine {  // a Linear with bias: y = x w^T + b
    Matrix64 w;    // [out][in]
    std::vector<double> b;  // [out]
  };
  struct Norm {  // LayerNorm
    std::vector<double> w, b;
  };
  struct Block {
    Norm norm1, norm2;
    Affine qkv, proj, fc1, fc2;
  };

  VisionConfig v_;
  Affine patch_embed_;           // [D][patch_dim]
  Matrix64 pos_table_;           // [num_position_embeddings][D], side x side
  std::vector<Block> blocks_;
  Norm merger_norm_;
  Affine merger_fc1_, merger_fc2_;  // [4D][4D], [out_hidden][4D]
  std::vector<double> inv_freq_;    // [head_dim / 4]: one axis of the 2-D rotary
};

}  // namespace deltagen
