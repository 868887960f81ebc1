// Default locations, found from this file's own path (std.thisFile), so that the configs' default
// paths do not depend on the directory `allennlp train` is run from.
local parts = std.split(std.thisFile, "/");
// "a/b/../c" -> "a/c", so that the paths written into a run's config.json read plainly.
local normalize(path) =
  local kept = std.foldl(
    function(stack, part)
      if part == "." || part == "" && std.length(stack) > 0 then stack
      else if part == ".." && std.length(stack) > 0 && stack[std.length(stack) - 1] != ".."
              && stack[std.length(stack) - 1] != "" then stack[0:std.length(stack) - 1]
      else stack + [part],
    std.split(path, "/"),
    []
  );
  if std.length(kept) == 0 then "." else std.join("/", kept);
{
  // The repository: training_configs/ is one of its directories.
  repository: normalize(std.join("/", parts[0:std.length(parts) - 1] + [".."])),
  // A path below the repository, e.g. in_repository("build/ko/vocabulary.txt").
  in_repository(relative):: normalize($.repository + "/" + relative),
  // The built-in sample corpus: what `bilm.jsonnet` trains on unless told otherwise.
  sample_corpus: $.in_repository("elmo_plugin/sample_corpus"),
  // The shared data of the project's machines (docs/testing.md, "Data"), beside the repository.
  shared_data: $.in_repository("../shared/data"),
  // Where the Makefile's pretraining targets export the biLMs that the +ELMo task configs load.
  english_bilm: $.in_repository("build/en_small/bilm"),
  korean_bilm: $.in_repository("build/ko/bilm"),
}
