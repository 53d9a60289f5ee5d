// The error of a model file that cannot be read as a GGUF model (missing, not GGUF, truncated, a split file that
// does not name the model): its message names the problem, the caller adds the path.
export class ModelFileError extends Error {
  override name = 'ModelFileError';
}
