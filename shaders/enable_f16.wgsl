enable f16;
