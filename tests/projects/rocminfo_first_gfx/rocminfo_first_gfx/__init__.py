"""Built for the first gfx name rocminfo prints, as DeepSpeed and the ROCm fork of apex do."""
