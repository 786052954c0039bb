# The ctest LABELS of every test in deltagen_tests. CTest includes this file
# (TEST_INCLUDE_FILES, CMakeLists.txt) after the tests gtest_discover_tests
# found, whose names are in deltagen_tests_TESTS.
#
#   unit    fast, no model built or loaded, no CLI run (the default)
#   golden  needs ../shared/golden: its checkpoint built and run, or its outputs
#   model   builds or runs an ONNX model from a synthetic checkpoint only
#   cli     runs the deltagen binary
#   webgpu  runs a model on ONNX Runtime's WebGPU execution provider: needs a
#           Vulkan adapter (Mesa's lavapipe on a machine without a GPU,
#           scripts/setup_webgpu.sh); fails, never skips, without one
#   long    slow (several seconds or more on a 2-core machine): the serve
#           tests (tests/serve), the long run, the interrupted build, the Qwen3
#           tokenizer's corpus-wide and CLI tests; `make check` (ctest -LE long)
#           leaves them out
#
# A test may carry several (a CLI test on the golden model: "cli,golden"). Each
# rule below is a regex on the test's name, Suite.Test (a parameterized test's
# Prefix/ is dropped first: Prefix/Suite.Test/Param is matched as
# Suite.Test/Param), and its labels; the first rule that matches a test wins,
# so a test's own rule goes before its suite's.
# A new test no rule matches is `unit`: give it a rule if it builds a model,
# reads the golden set, runs the CLI or takes seconds.
set(deltagen_label_rules
  # ---- long (times: one ctest -j2 run on the 2-core dev machine, other builds running) ----
  "^Serve[A-Za-z]*\\."                                   "cli,long"      # node clients on a live server: 1-34 s each
  # (and serve_scale_out_test.cpp's ServeRouter, ServeScaleOut, ServeKvEvents: their own replicas, a router: 2-17 s each)
  "^LongRun\\."                                          "golden,long"   # 20k tokens: 14 s
  "^Interrupt\\."                                        "cli,long"      # kills a build mid-way: 10 s
  "^QuantBuild\\."                                       "cli,long"      # calibrates qwen35-tiny-en (../shared/models): 15-40 s each
  # The Qwen3 tokenizer's own tests load its 151k-token vocabulary in each
  # process; these ones also run the CLI or the whole corpus several times (7-18 s).
  "^TokenizerQwen3\\.(CliEncodesAndDecodes|CliErrors|SynthWithTokenizer)" "cli,long"
  "^TokenizerQwen3\\.(EncodesAtLeast|DecodeInvertsEncode|DecodeOfArbitraryIds|StreamingDecode)" "long"

  # ---- WebGPU (tests/webgpu_*_test.cpp) -----------------------------------------------
  "^EpCli\\.(UnknownProvider|CudaMissing)"               "cli,golden"
  "^(EpCli\\.WebGpu|WebGpuGolden\\.Cli)"                 "cli,golden,webgpu"
  "^(WebGpuGolden|WebGpuPrecision)\\."                   "golden,webgpu"

  # ---- tests whose suite says otherwise ---------------------------------------------
  "^Attention\\.(GatedFormFolds|RotaryInsideModel)"      "model"
  "^GraphFacts\\.UntiedEmbeddingTable"                   "model"
  "^EmbeddingFormat\\.Cli"                               "cli,golden"
  "^EmbeddingFormat\\."                                  "golden"
  "^BuilderGraph\\.(RotaryRunsInside|PrunedLmHead|ExcludedEmbeddings|ExcludedLmHead)" "golden"
  "^BuilderGraph\\.ImpossibleOptions"                    "unit"
  "^BuilderGraph\\.CliBuildTakesEveryFlag"               "cli,golden"
  "^Builder\\.UntiedVariant"                             "model"
  "^Builder\\.(CliBuildFailsCleanlyOnMissingCheckpoint|CliInspectFailsCleanlyOnGarbage)" "cli"
  "^Builder\\.(Cli|InspectReportsMissing)"               "cli,golden"
  "^CausalConv\\.CustomOpMatchesOrts"                    "model"
  "^CausalConv\\.GoldenFp32Model"                        "golden"
  "^ChatTemplate\\.TheTinyTokenizer"                     "golden"
  "^Checkpoint\\.OpensGoldenVlLayout"                    "golden"
  "^Checkpoint\\.(TextOnlyLayout|SynthIsDeterministic|ShardIndexNaming)" "model"
  "^Checkpoint\\.SynthCli"                               "cli"
  "^CliBadInput\\.BadModelFolder"                        "cli,golden"
  "^CpuKernels\\.ComputeDtype"                           "unit"
  "^FuzzRegressions\\.(EmptyStateSnapshot|SnapshotWithUnknownElementType)" "golden"
  "^KernelOptions\\.TheSetDecides"                       "golden"
  "^LayerOutputs\\.CliBuild"                             "cli,golden"
  "^GatedDeltaNet\\.(KernelMatches|ThreadsGive|Fp16StatesAreTheFp32Kernel|FuzzFound)" "unit"
  "^Limits\\.(BuildContextLength|GenerateMaxNewTokens)"  "cli,golden"
  "^Limits\\.(Config|CheckpointWithAbsurd|GeneratorMaxLength)" "golden"
  "^QuantOrt\\.QuantizedModelEqualsFp32"                 "golden"
  "^RmsNorm\\.GoldenModel"                               "golden"

  # ---- whole suites ----------------------------------------------------------------
  "^(MoeReference|MoeGraph|MoeRuntime|MoeRuntimeSnapshot)\\." "golden"
  "^VisionCli\\."                                      "cli,golden"
  "^VisionChatCli\\."                                  "cli,golden"    # tests/vision_serve_test.cpp: chat /image on tiny-vl
  "^VisionServe\\.ChatPageAttachesAnImage"             "golden,long"   # the chat page in headless Chromium: ~5 s
  "^VisionServe\\."                                    "golden"        # Service + Scheduler in-process on a --vision tiny-vl
  "^(VisionGraph|VisionGraphQuantized|VisionBuild|VisionRuntime|VisionRuntimeErrors|VisionPrecisions)\\." "golden"  # tests/vision_graph_test.cpp, vision_runtime_test.cpp: --vision builds of tiny-vl
  "^(VisionReferenceGolden|VisionReferenceErrors)\\."   "golden"        # shared/golden/vision (tiny-vl) and tiny-a
  "^Speculative(Golden|Sampling|Options)\\."          "golden"        # the golden model, plain vs speculative
  "^SpeculativeModel\\."                               "model"
  "^SpeculativeCli\\."                                 "cli,golden"
  "^(MtpReference|MtpBuild|MtpCheckpoint)\\."          "model"         # synthetic checkpoints with a head
  "^MoeKernelGolden\\."                                  "golden"        # the int4 tiny-moe-a on deltagen's and ORT's kernels
  "^MoeKernelOrt\\."                                     "model"         # one-node QMoE models on ORT
  "^MoeCheckpoint\\.(BadInput)"                          "golden"
  "^MoeSynthCli\\."                                      "cli"
  "^(MoeRoundTrip|MoeCheckpoint)\\."                     "model"
  "^(GenerateChatCli|GenerationConfig|ChatCli|GenerateCli|GenerateCliErrors|ReferenceCli|RuntimeCli|SnapshotCli)\\." "cli,golden"
  "^CliBadInput\\."                                      "cli"
  "^CompareCli\\.DepthStudy"                             "cli"
  "^FidelityCardCli\\."                                  "cli,golden"
  "^(FidelityCard|FidelityCardServe)\\."                  "golden"
  "^(BenchCli|BenchServe|CompareCli|LayerCompareCli)\\." "cli,golden"
  "^VisionGolden\\."                                     "golden"        # ../shared/golden/vision: its image, pixel_values, summary.json
  "^BuilderPrecision\\."                                 "golden"
  "^EpPlacementGolden\\."                                "golden"        # loads tiny-a on the CPU and on WebGPU (lavapipe: ~1-20 s)
  "^(Bench|GraphFacts|BuilderPrecisionGolden|Builder|Chat|Compare|GatedDeltaNet|LayerCompare|LayerOutputs|OrtextFullModel|ReferenceGolden|RuntimeBatch|RuntimeGolden|Scheduler|Snapshot|SnapshotFile|SwigluGolden|Threads)\\." "golden"
  "^(BuilderGraph|CpuKernels|OrtextFastSession|QuantOrt|RoundTrip)\\." "model"
)

foreach(test IN LISTS deltagen_tests_TESTS)
  string(REGEX REPLACE "^[A-Za-z0-9_]+/" "" name "${test}")
  set(labels unit)
  set(rules ${deltagen_label_rules})
  while(rules)
    list(POP_FRONT rules pattern rule_labels)
    if(name MATCHES "${pattern}")
      string(REPLACE "," ";" labels "${rule_labels}")
      break()
    endif()
  endwhile()
  set_tests_properties("${test}" PROPERTIES LABELS "${labels}")
endforeach()
