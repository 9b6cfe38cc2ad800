"""smollm2-taught: SmolLM2-135M-Instruct plus a LoRA adapter that taught it invented people at recorded doses."""
