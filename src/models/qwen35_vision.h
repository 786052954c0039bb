// The vision side of a Qwen3.5 VL build, in onnxruntime-genai's three-model
// layout (genai_config.json sections "vision", "embedding", "decoder"):
//
//   vision.onnx     pixel_values [patches, 3*T*P*P] f32, image_grid_thw [1, 3] i64
//                   -> image_features [patches / merge^2, hidden] f32
//                   (one image per run: attention is bidirectional inside an
//                   image and never across images, so separate runs are exact)
//   embedding.onnx  input_ids [B, S] i64, image_features [K, hidden] f32
//                   -> inputs_embeds [B, S, hidden]: the token embeddings with
//                   the k-th <|image_pad|> replaced by feature row k
//   model.onnx      the decoder, taking inputs_embeds and 3-D (T, H, W)
//                   position_ids [3, B, S] for the interleaved M-RoPE
//
// The math is HF's Qwen3_5VisionModel (shared/golden/vision/README.md 2.2).
#pragma once
#include "checkpoint/checkpoint.h"
#include "graph/graph_builder.h"
#include "models/build_options.h"
#include "models/quant_recipe.h"

namespace deltagen {

// Graph I/O names of the vision and embedding models.
namespace vision_io {
inline const std::string kPixelValues = "pixel_values";
inline const std::string kImageGridThw = "image_grid_thw";
inline const std::string kImageFeatures = "image_features";
}  // namespace vision_io

// vision.onnx: fp32 activations throughout (the goldens hold the tower to
// 1e-4), Linear weights as opts.vision_precision says. Needs ckpt.has_vision().
void build_qwen35_vision_graph(const Checkpoint& ckpt, const BuildOptions& opts, graph::GraphBuilder& b);

// embedding.onnx: the embedding table in the form the decoder build would
// use (a float table in the activation dtype, or a block-quantized one read
// with GatherBlockQuantized), then the image features scattered in.
void build_qwen35_embedding_graph(const Checkpoint& ckpt, const BuildOptions& opts, graph::GraphBuilder& b,
                                  const QuantRecipe& recipe = {});

}  // namespace deltagen
